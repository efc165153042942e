//! Command pipelining (RFC 959 lets a client send several commands and read the replies in order), used only
//! with drsftp servers (FEAT lists `DRS`): which command of a plan may go out while earlier ones still wait for
//! their replies ([`may_follow`]), and the replies still due to commands of an operation that has already ended
//! (the session's swallow count), which must never be taken for replies of the next operation.
//!
//! A batch is a run of consecutive [`Step::Cmd`](super::plan::Step) steps: the transfer set-up commands that
//! cannot change the plan (TYPE I, MODE, a buffer size without SBUF fallback, `OPTS RETR`, `OPTS DRS`), a
//! buffer size with a fallback as the last of them (its refusal inserts `SBUF n` right behind it), PASV or EPSV
//! as the last of them, and PORT followed by the file transfer command, which always ends a batch. The blast set-up is one batch too: `OPTS
//! BLAST`, `BPAS` (the UDP socket is bound before the batch), `REST <ranges>` or ALLO, and the transfer command,
//! so a short blast transfer starts one round trip after the client begins (issue 22). ALLO and a non-required
//! REST may carry the transfer command behind them. SIZE rides right behind its TYPE I (one round trip, which
//! the check after a third-party copy pays on the far end). Login is one batch too (USER, PASS, FEAT, and what the
//! caller set to ride behind FEAT: a copy's TYPE I, SIZE and MDTM), when the greeting says `drsftp`, since FEAT has
//! not been asked yet. `AUTH TLS` does not even wait for the greeting (`session.rs`). Everything else (PASV/EPSV after anything but
//! set-up, a stream-mode REST, CKSM, AUTH, raw commands, listings, QUIT) and every non-command step (BlastBind,
//! DataReady, and Listen behind anything but set-up) waits until nothing is in flight. A MODE E download's Listen
//! may follow set-up commands ([`listen_may_follow`]), so its set-up, PORT, REST and RETR leave in one write, when
//! no SPAS is asked (a server announcing `STRIPES 1`). Against any other server (Globus) the session sends
//! one command at a time, as before.
//!
//! ABOR can be pipelined too ([`ClientSession::abort_and_go_on`], a `--transport auto` switch): the aborted
//! operation ends at once and the next one's commands go out in the same write; the server answers ABOR ahead of
//! them (it jumps the queue) and its replies are swallowed. A trailing CKSM behind the aborted transfer still runs
//! on the server; its `213` is kept ([`ClientSession::take_late_checksum`]) rather than thrown away.

use std::collections::VecDeque;

use std::time::Instant;

use super::answer::digest_of;
use super::plan::{Kind, Step};
use super::reply::Reply;
use super::session::ClientSession;
use super::types::{ClientError, Event};

/// Where the answer to a trailing CKSM left behind a pipelined ABOR may come among the swallowed replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LateCksm {
    /// The CKSM command as sent (`CKSM <alg> 0 -1 <path>`).
    command: String,
    /// Swallowed final replies of older operations still to come first.
    skip: usize,
    /// Final replies of the aborted operation still to come (its commands', ABOR's, those behind it): the
    /// CKSM's is one of them, in an order that depends on whether the transfer ended before ABOR arrived.
    window: usize,
    /// The digest, once a `213` came in the window (no other command in it answers `213`).
    digest: Option<String>,
}

/// The transfer set-up commands that cannot change the plan: a refusal fails the operation or is a notice.
fn setup(k: Kind) -> bool {
    matches!(
        k,
        Kind::TypeI
            | Kind::Mode(_)
            | Kind::Buffer {
                sbuf_fallback: None
            }
            | Kind::OptsRetr
            | Kind::OptsDrs(_)
    )
}

/// May a MODE E download open its listener (and then send PORT and the RETR) while `inflight` still waits for
/// its reply? Yes when it is set-up only: nothing in those replies changes how many listeners there are or where
/// they are (a SPAS, whose reply does, is not set-up), so the whole download goes out in one write. A refused
/// set-up command fails the operation, and the PORT and RETR behind it are swallowed like any command left in
/// flight (`swallow_rest`). Only consulted for drsftp servers.
pub(super) fn listen_may_follow(inflight: Kind) -> bool {
    setup(inflight)
}

/// May a command of kind `next` be sent while `last` (the newest command in flight) still waits for its reply?
/// Only consulted for drsftp servers.
pub(super) fn may_follow(last: Kind, next: Kind) -> bool {
    match last {
        // Nothing goes past a buffer size with an SBUF fallback: its refusal inserts the next step.
        // A download's SPAS only tells how many listeners to open: it may end the set-up batch (the Listen step
        // after it waits for every reply anyway).
        // PASV/EPSV may end it as well: the data connection waits for its reply anyway, and a refused PASV
        // puts EPSV right behind it (nothing else is in flight by then).
        // PORT comes only from a download's Listen step, which follows set-up only (`listen_may_follow`).
        k if setup(k) => {
            setup(next)
                || matches!(
                    next,
                    Kind::Buffer { .. }
                        | Kind::Spas { upload: false }
                        | Kind::Pasv
                        | Kind::Epsv
                        | Kind::Port
                )
                || (k == Kind::TypeI && matches!(next, Kind::OptsBlast | Kind::Size))
        }
        // A download's REST ranges (what it holds already; a refusal is a notice, the server then sends all)
        // ride with PORT and the RETR.
        Kind::Port => matches!(
            next,
            Kind::Transfer { listing: false } | Kind::Rest { required: false }
        ),
        // The server queues it behind the running transfer and answers once the transfer has ended.
        Kind::Transfer { listing: false } => {
            matches!(next, Kind::TrailingSize | Kind::TrailingCksm)
        }
        Kind::TrailingSize => next == Kind::TrailingCksm,
        // `Op::Commands`: independent commands whose replies the caller judges, all in one write.
        Kind::Piped => next == Kind::Piped,
        // The blast set-up: OPTS BLAST (behind TYPE I) and BPAS, then REST (ranges) or ALLO, and the transfer
        // command. Nothing in it changes the plan: a refusal fails the operation (or is a notice), and the
        // server runs the queued commands in order once its UDP socket is bound.
        Kind::OptsBlast => next == Kind::Bpas,
        Kind::Bpas => matches!(
            next,
            Kind::Rest { required: false } | Kind::Allo | Kind::Transfer { listing: false }
        ),
        Kind::Rest { required: false } | Kind::Allo => next == Kind::Transfer { listing: false },
        // Login in one write: a refused USER or PASS ends the operation and the rest is swallowed; the server
        // holds FEAT until it has checked the password.
        Kind::User => next == Kind::Pass,
        Kind::Pass => next == Kind::Feat,
        // Under TLS, PBSZ and PROT lead the login's write (`prot_pending`); a refusal of either ends it.
        Kind::Pbsz => next == Kind::Prot,
        Kind::Prot => next == Kind::User,
        // What the caller asks first after a login rides behind FEAT (`set_after_login`).
        Kind::Feat | Kind::AfterLogin => next == Kind::AfterLogin,
        _ => false,
    }
}

impl ClientSession {
    /// [`Op::Command`](super::Op::Command)'s plan. A bare transfer command (third-party: the servers' data
    /// channel is set up between them) waits through 1xx and markers like a transfer, with no reply deadline
    /// once started, and ends in `Outcome::Transferred`; ABOR works on it. The checks asked for ride behind it.
    pub(super) fn plan_command(&mut self, line: String) -> VecDeque<Step> {
        let verb = line.split(' ').next().unwrap_or("").to_ascii_uppercase();
        if !matches!(verb.as_str(), "RETR" | "ERET" | "STOR" | "ESTO" | "APPE") {
            return [Step::Cmd(line, Kind::Raw)].into();
        }
        // ERET/ESTO name a module and its arguments before the path: only a plain path is checked.
        let path = line.split_once(' ').map(|(_, p)| p.to_string());
        let plain = matches!(verb.as_str(), "RETR" | "STOR" | "APPE");
        let trailing = self.trailing_steps(path.filter(|_| plain));
        let mut s = VecDeque::from([Step::Cmd(line, Kind::Transfer { listing: false })]);
        s.extend(trailing);
        s
    }

    /// The commands to pipeline behind a transfer command for `path` (`None`: not a whole file): SIZE and CKSM
    /// as [`ClientSession::set_trailing_size`] and [`ClientSession::set_trailing_checksum`] asked, with a drsftp
    /// server (which queues them and answers once the transfer has ended). Clears both requests either way.
    pub(super) fn trailing_steps(&mut self, path: Option<String>) -> Vec<Step> {
        let (size, alg) = (
            std::mem::take(&mut self.trailing_size),
            self.trailing_cksm.take(),
        );
        let Some(path) = path.filter(|_| self.features.drs()) else {
            return vec![];
        };
        let mut steps = vec![];
        if size {
            steps.push(Step::Cmd(format!("SIZE {path}"), Kind::TrailingSize));
        }
        if let Some(alg) = alg {
            steps.push(Step::Cmd(
                format!("CKSM {alg} 0 -1 {path}"),
                Kind::TrailingCksm,
            ));
        }
        steps
    }

    /// The running operation ended while `rest` (oldest first) were still in flight: their final replies will
    /// arrive later and are dropped ([`ClientSession::swallowed`]). What they may have changed on the server is
    /// no longer known, so the next transfer repeats it: TYPE I, MODE, `OPTS DRS`.
    ///
    /// A swallowed transfer command (RETR/ERET behind a refused PORT) could in principle start a transfer on the
    /// server. The client makes no data connection for it and does not serve one (the failed operation's
    /// listener is the driver's to drop), so the server gets none and fails it (`425`); that is acceptable, and
    /// both its preliminary and its final replies are swallowed. ABOR ([`ClientSession::abort`]) never leaves a
    /// transfer command to swallow: it waits for all of its replies instead.
    pub(super) fn swallow_rest(&mut self, rest: impl IntoIterator<Item = Kind>) {
        for kind in rest {
            self.swallow += 1;
            match kind {
                Kind::TypeI => self.type_image = false,
                Kind::Mode(_) => self.mode = None,
                Kind::OptsDrs(_) => self.drs_unsure = true,
                _ => {}
            }
        }
    }

    /// True if `reply` answers a command of an operation that has already ended (it is then dropped; the crate
    /// has no logging). Preliminary replies and markers of such a command are dropped too; a final reply
    /// counts one off. A `421` (the server is closing) is never dropped.
    pub(super) fn swallowed(&mut self, reply: &Reply) -> bool {
        if self.swallow == 0 {
            return false;
        }
        if reply.code == 421 {
            self.swallow = 0;
            if let Some(l) = self.late_cksm.as_mut() {
                l.window = 0;
            }
            return false;
        }
        if !reply.is_preliminary() {
            self.swallow -= 1;
            if let Some(l) = self.late_cksm.as_mut() {
                if l.skip > 0 {
                    l.skip -= 1;
                } else if l.window > 0 {
                    l.window -= 1;
                    if reply.code == 213 && l.digest.is_none() {
                        l.digest = digest_of(reply);
                    }
                }
            }
        }
        true
    }

    /// Aborts the running transfer without waiting for the server's answer: `ABOR` is queued, the operation
    /// ends at once with [`ClientError::Aborted`] (an [`Event::Failed`]), and the next operation's commands go
    /// out right behind `ABOR`. The server answers ABOR before them (it jumps its queue): the transfer's final
    /// reply (`426`, or its own `226` if it had just ended), ABOR's `226`, then the commands that were pipelined
    /// behind the transfer; all are swallowed, except that the digest of a trailing CKSM is kept for
    /// [`ClientSession::take_late_checksum`]. This saves the round trip [`ClientSession::abort`] waits.
    ///
    /// Only with a drsftp server (others get one command at a time, and their ABOR replies vary), and not
    /// while an in-band `SBUF` waits for its reply (that reply would be miscounted). Returns false when it does
    /// nothing for those reasons: use [`ClientSession::abort`] and wait. Without a running operation it returns
    /// true; before the transfer command it fails the operation at once, like `abort`.
    pub fn abort_and_go_on(&mut self, now: Instant) -> bool {
        let Some(run) = self.current.as_ref() else {
            return true;
        };
        if !self.features.drs() || self.drs.outstanding() || run.abort_pending.is_some() {
            return false;
        }
        let Some(at) = run
            .inflight
            .iter()
            .position(|(_, k)| matches!(k, Kind::Transfer { .. }))
        else {
            self.abort(now);
            return true;
        };
        let Some(run) = self.current.take() else {
            return true;
        };
        let mut mine: VecDeque<(String, Kind)> = run.inflight;
        let behind: Vec<(String, Kind)> = mine.drain(at + 1..).collect();
        let skip = self.swallow;
        let window = mine.len() + 1 + behind.len();
        self.swallow_rest(mine.into_iter().map(|(_, k)| k));
        // ABOR's own `226`.
        self.swallow += 1;
        let sized = behind.iter().any(|(_, k)| *k == Kind::TrailingSize);
        let cksm = behind
            .iter()
            .find(|(_, k)| *k == Kind::TrailingCksm)
            .map(|(c, _)| c.clone())
            .filter(|_| !sized);
        self.swallow_rest(behind.into_iter().map(|(_, k)| k));
        self.late_cksm = cksm.map(|command| LateCksm {
            command,
            skip,
            window,
            digest: None,
        });
        self.out.push_back(b"ABOR\r\n".to_vec());
        self.deadline = None;
        self.events.push_back(Event::Failed(ClientError::Aborted));
        true
    }

    /// Pipelines the whole file's `CKSM <alg> 0 -1 <path>` behind the download that is already running, as
    /// [`ClientSession::set_trailing_checksum`] would have before it began: the server queues it and answers
    /// after the transfer's `226`, which then ends the operation with the digest in the report. A
    /// `--transport auto` download asks for it only once its rule said "stay on TCP": while a switch may still
    /// come, a CKSM queued behind the TCP RETR would be hashed on the server after the ABOR, ahead of the blast
    /// set-up (docs/auto-transport.md). Returns false (nothing sent) unless a drsftp server runs a plain RETR
    /// for this operation with no trailing check asked yet, no abort under way and no in-band SBUF unanswered
    /// (its late refusal would be counted against the CKSM).
    pub fn pipeline_trailing_checksum(&mut self, now: Instant, alg: &str) -> bool {
        if !self.features.drs() || self.drs.outstanding() {
            return false;
        }
        let Some(run) = self.current.as_mut() else {
            return false;
        };
        let Some((line, _)) = run
            .inflight
            .back()
            .filter(|(_, k)| *k == (Kind::Transfer { listing: false }))
        else {
            return false;
        };
        let Some(path) = line.strip_prefix("RETR ").map(str::to_string) else {
            return false;
        };
        let asked = run
            .steps
            .iter()
            .any(|s| matches!(s, Step::Cmd(_, Kind::TrailingCksm | Kind::TrailingSize)));
        if asked || run.abort_pending.is_some() || run.batch.is_some() {
            return false;
        }
        let line = format!("CKSM {alg} 0 -1 {path}");
        self.out.push_back(format!("{line}\r\n").into_bytes());
        run.inflight.push_back((line, Kind::TrailingCksm));
        // Once the transfer runs it has no reply deadline, and the CKSM is answered only after it: the deadline
        // is armed when its 226 comes (answer.rs), as for a CKSM sent with the RETR.
        if !run.started {
            self.deadline = Some(now + self.cfg.reply_timeout);
        }
        true
    }

    /// Whether a trailing CKSM was left behind a transfer ended by [`ClientSession::abort_and_go_on`] and its
    /// digest not yet taken: the server answers it, so the final check need not ask again.
    pub fn late_checksum_pending(&self) -> bool {
        self.late_cksm.is_some()
    }

    /// The digest the trailing CKSM of a transfer ended by [`ClientSession::abort_and_go_on`] answered with,
    /// and that CKSM command (`CKSM <alg> 0 -1 <path>`): the whole file's checksum on the server, as the final
    /// check would ask for it. `None` if it has not come (yet), was refused, or was not asked.
    pub fn take_late_checksum(&mut self) -> Option<(String, String)> {
        let l = self.late_cksm.take()?;
        match l.digest {
            Some(d) => Some((l.command, d)),
            None => {
                if l.window > 0 {
                    self.late_cksm = Some(l);
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::types::TransferMode;

    #[test]
    fn batches_stop_where_the_plan_may_change() {
        let e = Kind::Mode(TransferMode::Extended);
        let buf = |f| Kind::Buffer { sbuf_fallback: f };
        assert!(may_follow(Kind::TypeI, e));
        assert!(
            may_follow(e, buf(Some(1))),
            "a fallback buffer may end a batch"
        );
        assert!(!may_follow(buf(Some(1)), Kind::OptsRetr), "nothing past it");
        assert!(may_follow(buf(None), Kind::OptsDrs(true)));
        assert!(may_follow(Kind::OptsDrs(true), Kind::OptsRetr));
        assert!(may_follow(Kind::Port, Kind::Transfer { listing: false }));
        assert!(may_follow(Kind::Port, Kind::Rest { required: false }));
        assert!(
            !may_follow(Kind::Port, Kind::Rest { required: true }),
            "an upload's REST must be answered first"
        );
        assert!(
            may_follow(Kind::TypeI, Kind::Size),
            "SIZE rides with its TYPE I"
        );
        assert!(may_follow(Kind::OptsDrs(true), Kind::Pasv) && may_follow(e, Kind::Epsv));
        for next in [
            Kind::Allo,
            Kind::Rest { required: false },
            Kind::OptsBlast,
            Kind::Size,
            Kind::Transfer { listing: false },
            Kind::Transfer { listing: true },
        ] {
            assert!(!may_follow(Kind::OptsRetr, next), "{next:?}");
        }
        // A download's listener, and so its PORT, may follow set-up, never a SPAS or a buffer size whose
        // refusal inserts SBUF.
        assert!(may_follow(Kind::OptsRetr, Kind::Port) && listen_may_follow(Kind::OptsRetr));
        assert!(listen_may_follow(Kind::Mode(TransferMode::Extended)));
        assert!(!listen_may_follow(Kind::Spas { upload: false }));
        assert!(!listen_may_follow(Kind::Buffer {
            sbuf_fallback: Some(1 << 20)
        }));
        assert!(!listen_may_follow(Kind::Pasv) && !listen_may_follow(Kind::Feat));
        assert!(may_follow(Kind::User, Kind::Pass) && may_follow(Kind::Pass, Kind::Feat));
        for last in [
            Kind::Transfer { listing: false },
            Kind::Pasv,
            Kind::Allo,
            Kind::User,
            Kind::Feat,
            Kind::Raw,
        ] {
            assert!(!may_follow(last, Kind::TypeI), "{last:?}");
        }
        assert!(!may_follow(Kind::Port, Kind::Transfer { listing: true }));
    }
}
