//! Third-party batches: many small files from server A to server B over one MODE E data connection, the
//! commands of the next files pipelined (what globus-url-copy `-pp` does between two servers). [`Relay`] is the
//! sans-IO referee between the two control sessions; each session runs its own batch:
//!
//! - the destination an [`Op::UploadBatch`](super::Op::UploadBatch) (`PEER` and `PASV` when the channel is new,
//!   then `ALLO`/`STOR`/`MFMT`/`CKSM` per file, `first_alone`),
//! - the source a gated [`Op::Batch`](super::Op::Batch) (`OPTS RETR Parallelism=1,1,1;` and `PORT` with the
//!   destination's address when the channel is new, then `RETR`/`CKSM` per file). In MODE E the sender connects,
//!   so the source connects to the destination's passive listener once; both servers keep the connection
//!   between files (GFD.20 connection caching).
//!
//! The one rule that keeps a file's bytes out of another file: file k's RETR goes to the source only once the
//! destination has accepted file k's STOR with a 1xx (which it sends only after file k-1's final reply), so the
//! bytes the source sends next are read as file k's or not at all. A STOR refused outright fails that file alone:
//! its RETR is never sent. The exception is a channel not yet in use: a server may answer STOR only once the data
//! connection is in (globus-gridftp-server on a fresh passive listener), so while no STOR of the batch has had a
//! 1xx, a file whose STOR is the only one in flight (`first_alone`) is released after [`Relay::new`]'s
//! `blind_after` without its 1xx. Such a file refused afterwards leaves the channel in a state we cannot know, as
//! does a STOR that fails after its 1xx or a RETR the source refuses after the destination accepted the STOR:
//! the batch is then broken ([`Relay::broken`]) and the driver drops both sessions; files without a result go
//! through the one-file path. A file is copied only when both `226`s are in and the two CKSMs agree.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::reply::Reply;
use super::types::{Event, Outcome};

/// What became of one file of a [`Relay`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayResult {
    /// Both servers answered 2xx and the checksums agree (`checksum`), or were not asked for or refused
    /// (`unverified` says why). `mtime`: the destination's reply to MFMT, if it was sent.
    Copied {
        /// The agreed checksum (lower-case hex), if verified.
        checksum: Option<String>,
        /// Why it is not verified, if it is not.
        unverified: Option<String>,
        /// The destination's reply to MFMT.
        mtime: Option<Reply>,
    },
    /// The destination refused the STOR (outright, or after accepting it: then the batch is broken too); no byte
    /// was sent for it by the source unless it was accepted first.
    Refused(Reply),
    /// Both servers hold a file of that name, but their checksums differ.
    Mismatch {
        /// The source's checksum.
        source: String,
        /// The destination's checksum.
        destination: String,
    },
}

/// Why a [`Relay`] cannot go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayBreak {
    /// The file it happened at, if one.
    pub index: Option<usize>,
    /// What happened.
    pub why: String,
}

#[derive(Debug, Default)]
struct FileState {
    /// The destination accepted the STOR (1xx).
    started: bool,
    /// The source's RETR was released; `Some(true)` without the destination's 1xx.
    released: Option<bool>,
    stor: Option<Reply>,
    retr: Option<Reply>,
    src_sum: Option<Result<String, Reply>>,
    dst_sum: Option<Result<String, Reply>>,
    mfmt: Option<Reply>,
    wants_mtime: bool,
    finished: bool,
}

/// The referee of one third-party batch (see the module docs). Feed it both sessions' events; it says which
/// file the source may read next ([`Relay::poll_decision`], for
/// [`ClientSession::decide_batch_file`](super::ClientSession::decide_batch_file)) and what became of each file.
#[derive(Debug)]
pub struct Relay {
    files: Vec<FileState>,
    verify: bool,
    /// The next file to decide.
    next: usize,
    /// A STOR of this batch got its 1xx: the channel is in use.
    proven: bool,
    /// The destination's first STOR is out (the channel is set up); before, nothing is released blind.
    ready: bool,
    blind_after: Duration,
    timer: Option<Instant>,
    decisions: VecDeque<bool>,
    results: VecDeque<(usize, RelayResult)>,
    broken: Option<RelayBreak>,
    src_done: bool,
    dst_done: bool,
}

impl Relay {
    /// A batch of `mtimes.len()` files (`mtimes[i]`: file i's STOR is followed by MFMT); `verify`: both sessions
    /// send CKSM per file; `blind_after`: how long a first STOR may go unanswered before its RETR is released
    /// anyway (see the module docs).
    pub fn new(mtimes: &[bool], verify: bool, blind_after: Duration) -> Self {
        Relay {
            files: mtimes
                .iter()
                .map(|&m| FileState {
                    wants_mtime: m,
                    ..FileState::default()
                })
                .collect(),
            verify,
            next: 0,
            proven: false,
            ready: false,
            blind_after,
            timer: None,
            decisions: VecDeque::new(),
            results: VecDeque::new(),
            broken: None,
            src_done: false,
            dst_done: false,
        }
    }

    /// The destination's STORs go out from now: its PASV was answered and the source told (a new channel), or
    /// the batch started on a kept one.
    pub fn channel_ready(&mut self, now: Instant) {
        self.ready = true;
        self.step(now);
    }

    /// An event of the destination's session.
    pub fn handle_dst(&mut self, now: Instant, ev: &Event) {
        match ev {
            Event::BatchStarted(k) => {
                if let Some(f) = self.files.get_mut(*k) {
                    f.started = true;
                    self.proven = true;
                }
            }
            Event::BatchStored { index, reply } => self.stored(*index, reply),
            Event::BatchMtime { index, reply } => {
                if let Some(f) = self.files.get_mut(*index) {
                    f.mfmt = Some(reply.clone());
                }
            }
            Event::BatchChecksum { index, result } => {
                if let Some(f) = self.files.get_mut(*index) {
                    f.dst_sum = Some(result.clone());
                }
            }
            Event::Done(Outcome::Batch) => self.dst_done = true,
            Event::Done(o) => self.fail(None, format!("destination: unexpected outcome {o:?}")),
            Event::Failed(e) => self.fail(None, format!("destination: {e}")),
            _ => {}
        }
        self.step(now);
    }

    /// An event of the source's session.
    pub fn handle_src(&mut self, now: Instant, ev: &Event) {
        match ev {
            Event::BatchRetr { index, reply } => {
                if let Some(f) = self.files.get_mut(*index) {
                    f.retr = Some(reply.clone());
                    if !reply.is_ok() {
                        // The destination accepted (or may accept) the STOR and waits for bytes that will not come.
                        let why = format!("the source refused the RETR of file {index}: {reply}");
                        self.fail(Some(*index), why);
                    }
                }
            }
            Event::BatchChecksum { index, result } => {
                if let Some(f) = self.files.get_mut(*index) {
                    f.src_sum = Some(result.clone());
                }
            }
            Event::Done(Outcome::Batch) => self.src_done = true,
            Event::Done(o) => self.fail(None, format!("source: unexpected outcome {o:?}")),
            Event::Failed(e) => self.fail(None, format!("source: {e}")),
            _ => {}
        }
        self.step(now);
    }

    /// When [`Relay::handle_timeout`] is due (a blind release), if at all.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timer
    }

    /// Time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.step(now);
    }

    /// The source's next decision, in file order: `true` to send the next file's RETR, `false` to drop it.
    pub fn poll_decision(&mut self) -> Option<bool> {
        self.decisions.pop_front()
    }

    /// A file's outcome, each once.
    pub fn poll_result(&mut self) -> Option<(usize, RelayResult)> {
        self.results.pop_front()
    }

    /// Why the batch broke, if it did: nothing more is decided, and the driver drops both sessions.
    pub fn broken(&self) -> Option<&RelayBreak> {
        self.broken.as_ref()
    }

    /// Both sessions finished their batches, or the relay broke.
    pub fn is_done(&self) -> bool {
        self.broken.is_some() || (self.src_done && self.dst_done)
    }

    fn fail(&mut self, index: Option<usize>, why: String) {
        if self.broken.is_none() {
            self.broken = Some(RelayBreak { index, why });
            self.timer = None;
        }
    }

    fn stored(&mut self, k: usize, reply: &Reply) {
        let Some(f) = self.files.get_mut(k) else {
            return;
        };
        f.stor = Some(reply.clone());
        if reply.is_ok() || f.released.is_none() {
            return;
        }
        // Refused after its RETR was released: the source may send (or be sending) its bytes.
        f.finished = true;
        self.results
            .push_back((k, RelayResult::Refused(reply.clone())));
        let how = if f.started {
            "after accepting it"
        } else {
            "after it was started without a reply"
        };
        self.fail(
            Some(k),
            format!("the destination failed file {k} {how}: {reply}"),
        );
    }

    /// Decides what can be decided and finishes what is complete.
    fn step(&mut self, now: Instant) {
        if self.broken.is_some() {
            return;
        }
        while self.next < self.files.len() {
            let blind = self.blind_ok();
            let f = &mut self.files[self.next];
            if f.started {
                f.released = Some(false);
                self.decisions.push_back(true);
            } else if let Some(r) = &f.stor {
                // Answered without a 1xx: no byte of the source's may go as this file.
                f.finished = true;
                let result = if r.is_ok() {
                    RelayResult::Refused(Reply::new(
                        451,
                        format!("answered {r} without accepting data"),
                    ))
                } else {
                    RelayResult::Refused(r.clone())
                };
                self.results.push_back((self.next, result));
                self.decisions.push_back(false);
            } else if blind {
                let due = *self.timer.get_or_insert(now + self.blind_after);
                if now < due {
                    break;
                }
                f.released = Some(true);
                self.decisions.push_back(true);
            } else {
                break;
            }
            self.timer = None;
            self.next += 1;
        }
        for k in 0..self.files.len() {
            if let Some(r) = self.complete(k) {
                self.files[k].finished = true;
                self.results.push_back((k, r));
            }
        }
    }

    /// May the next file be released without its 1xx? Only on a channel not yet in use, with its STOR the only
    /// one in flight (every earlier file has its final reply).
    fn blind_ok(&self) -> bool {
        !self.proven && self.ready && self.files[..self.next].iter().all(|f| f.stor.is_some())
    }

    /// File `k`'s outcome, once everything about it is in.
    fn complete(&self, k: usize) -> Option<RelayResult> {
        let f = &self.files[k];
        if f.finished || f.released.is_none() {
            return None;
        }
        let (stor, retr) = (f.stor.as_ref()?, f.retr.as_ref()?);
        if !(stor.is_ok() && retr.is_ok()) || (f.wants_mtime && f.mfmt.is_none()) {
            return None;
        }
        let mtime = f.mfmt.clone();
        if !self.verify {
            return Some(RelayResult::Copied {
                checksum: None,
                unverified: Some("checksums not asked for".into()),
                mtime,
            });
        }
        Some(match (f.src_sum.as_ref()?, f.dst_sum.as_ref()?) {
            (Ok(a), Ok(b)) if a == b => RelayResult::Copied {
                checksum: Some(a.clone()),
                unverified: None,
                mtime,
            },
            (Ok(a), Ok(b)) => RelayResult::Mismatch {
                source: a.clone(),
                destination: b.clone(),
            },
            (Err(r), _) | (_, Err(r)) => RelayResult::Copied {
                checksum: None,
                unverified: Some(format!("a server refused CKSM: {r}")),
                mtime,
            },
        })
    }
}
