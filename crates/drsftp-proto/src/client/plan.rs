//! The command plan of an operation: what each command's reply means to the session ([`Kind`]), the steps an
//! operation runs through ([`Step`]), and how a transfer becomes steps — TYPE/MODE only when needed, buffer size,
//! the DRS opt-in, parallelism, then PORT (MODE E download) or PASV, ALLO and the transfer command (striped:
//! SPAS first, then SPOR for a download or connections to every stripe for an upload); a blast
//! transfer instead gets `OPTS BLAST` and a UDP socket announced with `BPAS` (docs/blast.md).
//!
//! The plan is the same for every server; how much of it goes out at once is the session's business: with a
//! drsftp server the set-up commands up to the Listen/PASV step form one pipelined batch and PORT goes out with
//! RETR/ERET (`pipeline.rs` says which [`Kind`]s may be batched), with any other server one command at a time.

use std::collections::VecDeque;

use super::blast;
use super::drs::{OPTS_OFF, OPTS_ON};
use super::session::ClientSession;
use super::types::{BlastRequest, Direction, TransferMode, TransferSpec};
use crate::ranges::RangeSet;

/// What a command's reply means to the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    User,
    Pass,
    Feat,
    TypeI,
    Mode(TransferMode),
    /// Buffer size; on refusal try the fallback (`SBUF n`) if present.
    Buffer {
        sbuf_fallback: Option<u64>,
    },
    OptsRetr,
    /// `OPTS DRS Inband=1;` (true) or `Inband=0;` (false).
    OptsDrs(bool),
    OptsBlast,
    Bpas,
    Port,
    /// `SPAS` for a striped transfer: a download then listens per stripe and sends `SPOR`, an upload connects
    /// to each stripe; a refusal falls back to PORT (download) or PASV (upload).
    Spas {
        upload: bool,
    },
    Pasv,
    Epsv,
    Allo,
    /// `PEER <host>` before a third-party batch's PASV: a refusal is a notice.
    Peer,
    /// `REST` before a resumed download: `350` expected. With `required` (a stream-mode offset: the bytes
    /// would land in the wrong place) a refusal fails the operation; otherwise (ranges for blast or MODE E,
    /// whose blocks carry their offsets) it is a notice and the server sends everything.
    Rest {
        required: bool,
    },
    /// RETR/ERET/STOR/ESTO/MLSD/LIST/NLST: waits through 1xx and markers.
    Transfer {
        listing: bool,
    },
    Size,
    Cksm,
    /// The whole file's CKSM pipelined behind a transfer command ([`ClientSession::set_trailing_checksum`]):
    /// its reply completes the transfer's report, a refusal included (the caller then asks again or notes it).
    TrailingCksm,
    /// The file's SIZE pipelined behind a transfer command, before its trailing CKSM
    /// ([`ClientSession::set_trailing_size`]): its reply completes the report, a refusal included.
    TrailingSize,
    /// RETR of file `n` of a batch (`batch.rs`): 1xx, markers, then its own final reply; the batch goes on.
    BatchRetr(usize),
    /// CKSM of file `n` of a batch.
    BatchCksm(usize),
    /// STOR of file `n` of an upload batch (`upbatch.rs`): 1xx (its data may go), then its final reply.
    BatchStor(usize),
    /// MFMT of file `n` of an upload batch.
    BatchMfmt(usize),
    Raw,
    /// One of [`Op::Commands`](super::Op::Commands): its final reply, refusals included, is collected.
    Piped,
    /// A command pipelined behind a login's FEAT ([`ClientSession::set_after_login`]): its final reply,
    /// refusals included, is kept for the caller; the login ends with the last of them.
    AfterLogin,
    Quit,
    /// `AUTH TLS` for [`Op::Secure`](super::Op::Secure): `234` expected.
    Auth {
        require: bool,
        protect_data: bool,
    },
    /// `PBSZ 0`.
    Pbsz,
    /// `PROT P`: ends [`Op::Secure`](super::Op::Secure).
    Prot,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    Cmd(String, Kind),
    /// Emit [`Event::Listen`], wait for `handle_listening`.
    Listen,
    /// Emit [`Event::ListenStriped`], wait for `handle_listening_striped`.
    ListenStriped,
    /// Waiting for `handle_data_ready` after [`Event::Connect`].
    DataReady,
    /// Emit [`Event::BlastBind`], wait for `handle_blast_bound`.
    BlastBind,
    /// Emit [`Event::StartTls`], wait for `handle_tls_started`.
    StartTls,
}

impl ClientSession {
    /// TYPE I and MODE (`None`: any mode will do), only when the server is not known to be there already.
    pub(super) fn prelude(&self, mode: Option<TransferMode>) -> VecDeque<Step> {
        let mut s = VecDeque::new();
        if !self.type_image {
            s.push_back(Step::Cmd("TYPE I".into(), Kind::TypeI));
        }
        if let Some(mode) = mode.filter(|m| self.mode != Some(*m)) {
            s.push_back(Step::Cmd(
                format!("MODE {}", mode.letter()),
                Kind::Mode(mode),
            ));
        }
        s
    }

    /// The `OPTS DRS` line a transfer needs and the state it sets: as `Drs::opts_for` says,
    /// or stated explicitly after the reply to an earlier one was swallowed (the server's state is unknown).
    pub(super) fn drs_opts(&self, want: bool) -> Option<(&'static str, bool)> {
        let offered = self.features.drs();
        if self.drs_unsure && offered {
            return Some(if want {
                (OPTS_ON, true)
            } else {
                (OPTS_OFF, false)
            });
        }
        self.drs.opts_for(want, offered)
    }

    /// `resume`: the bytes a download already holds (set by [`ClientSession::set_resume`]): MODE E sends them
    /// as `REST <ranges>` (the server sends only the gaps), stream mode the held prefix as `REST <offset>`.
    /// For a MODE E upload: the ranges the server keeps, and we send only the gaps.
    pub(super) fn plan_transfer(
        &self,
        spec: &TransferSpec,
        resume: Option<&RangeSet>,
    ) -> VecDeque<Step> {
        let down = spec.direction == Direction::Download;
        let ext = spec.mode == TransferMode::Extended;
        let mut s = self.prelude(Some(spec.mode));
        if let Some(b) = spec.tcp_buffer {
            let verb = if down {
                "SITE RETRBUFSIZE"
            } else {
                "SITE STORBUFSIZE"
            };
            s.push_back(Step::Cmd(
                format!("{verb} {b}"),
                Kind::Buffer {
                    sbuf_fallback: Some(b),
                },
            ));
        }
        if let Some((line, on)) = self.drs_opts(spec.drs) {
            s.push_back(Step::Cmd(line.to_string(), Kind::OptsDrs(on)));
        }
        // Striping needs SPAS (and for a download SPOR to answer it); blast and stream mode never stripe. A
        // server that says it has one stripe (`STRIPES 1`) is not asked: a download then listens at once.
        let stripe = ext
            && spec.stripes
            && self.features.has("SPAS")
            && (!down || self.features.has("SPOR"))
            && self.features.stripes().is_none_or(|n| n > 1);
        if down && ext {
            let n = spec.streams.max(1);
            let (lo, hi) = match spec.streams_range {
                Some((lo, hi)) if lo >= 1 && lo <= n && n <= hi => (lo, hi),
                _ => (n, n),
            };
            s.push_back(Step::Cmd(
                format!("OPTS RETR Parallelism={n},{lo},{hi};"),
                Kind::OptsRetr,
            ));
            if stripe {
                s.push_back(Step::Cmd("SPAS".into(), Kind::Spas { upload: false }));
            }
            s.push_back(Step::Listen);
        } else if stripe {
            s.push_back(Step::Cmd("SPAS".into(), Kind::Spas { upload: true }));
        } else {
            s.push_back(Step::Cmd("PASV".into(), Kind::Pasv));
        }
        match resume.filter(|r| !r.is_empty()) {
            // An upload sends only the gaps, so a server that refuses its ranges must fail the transfer.
            Some(r) if ext => s.push_back(Step::Cmd(
                format!("REST {r}"),
                Kind::Rest { required: !down },
            )),
            Some(r) if down => match r.ranges().first() {
                Some(p) if p.start == 0 => s.push_back(Step::Cmd(
                    format!("REST {}", p.end),
                    Kind::Rest { required: true },
                )),
                _ => {}
            },
            _ => {}
        }
        Self::transfer_steps(spec, &mut s);
        s
    }

    /// A blast transfer: a UDP socket bound, then TYPE I, `OPTS BLAST`, the socket announced with `BPAS`, ALLO for
    /// uploads, the transfer command (with a drsftp server all in one round trip). MODE, buffer sizes and
    /// parallelism do not apply.
    /// A download with `resume` (set by [`ClientSession::set_blast_resume`]) sends `REST <ranges>` right before
    /// RETR/ERET: the bytes (relative to the section) the client already holds (docs/blast.md "Resume").
    pub(super) fn plan_blast(
        &self,
        spec: &TransferSpec,
        req: &BlastRequest,
        resume: Option<&RangeSet>,
    ) -> VecDeque<Step> {
        // The UDP socket is bound first, locally, so that the whole set-up can go out in one pipelined batch
        // (`pipeline.rs`); the BPAS line is filled in once the driver names the socket.
        let mut s = VecDeque::from([Step::BlastBind]);
        s.extend(self.prelude(None));
        s.push_back(Step::Cmd(blast::opts_line(req), Kind::OptsBlast));
        s.push_back(Step::Cmd(String::new(), Kind::Bpas));
        match resume {
            Some(r) if spec.direction == Direction::Download && !r.is_empty() => {
                s.push_back(Step::Cmd(
                    format!("REST {r}"),
                    Kind::Rest { required: false },
                ));
            }
            _ => {}
        }
        Self::transfer_steps(spec, &mut s);
        s
    }

    /// The next download resumes: it announces `held` (byte ranges relative to the section, as the receiver's
    /// checkpoint covers them) with `REST` before its transfer command (blast and MODE E: the ranges; stream
    /// mode: the end of the held prefix, nothing if none starts at 0). Used by the next
    /// [`Op::Transfer`](super::Op::Transfer) only, whatever it is. A MODE E upload sends them the same way:
    /// the ranges the server said it keeps (`SITE PARTIAL`), and a refused `REST` then fails the transfer.
    pub fn set_resume(&mut self, held: RangeSet) {
        self.resume = Some(held);
    }

    /// ALLO (uploads) and the transfer command.
    fn transfer_steps(spec: &TransferSpec, s: &mut VecDeque<Step>) {
        let down = spec.direction == Direction::Download;
        let cmd = match (spec.direction, spec.partial) {
            (Direction::Download, None) => format!("RETR {}", spec.path),
            (Direction::Download, Some(p)) => {
                format!("ERET P {} {} {}", p.offset, p.length, spec.path)
            }
            (Direction::Upload, None) => format!("STOR {}", spec.path),
            (Direction::Upload, Some(p)) => format!("ESTO A {} {}", p.offset, spec.path),
        };
        if !down {
            let alloc = spec.partial.map(|p| p.length).or(spec.alloc);
            if let Some(a) = alloc {
                s.push_back(Step::Cmd(format!("ALLO {a}"), Kind::Allo));
            }
        }
        s.push_back(Step::Cmd(cmd, Kind::Transfer { listing: false }));
    }
}
