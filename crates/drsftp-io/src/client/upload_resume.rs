//! Upload resume against servers that keep no partials but send restart markers (globus-gridftp-server,
//! docs/resume.md "Upload resume against Globus"): the client keeps the ranges the server confirmed with
//! `111 Range Marker` replies in a local checkpoint, and a rerun sends `REST <ranges>` before the MODE E `STOR`
//! and only the gaps.
//!
//! * Where: `$XDG_STATE_HOME/drsftp/uploads` (else `~/.local/state/drsftp/uploads`), one file per upload named
//!   by a SHA-256 of its identity (server address and path, size, the local file's version tag), in the range
//!   checkpoint format of downloads ([`RangeCheckpoint`], the tag in its `mtime` line). A changed local file or
//!   another destination never finds another upload's ranges; a corrupt or foreign file is ignored and replaced.
//! * When: a writer thread saves a record at once (so even a run killed before the first marker is known to
//!   have started), then the held ranges plus every marker of this run as markers arrive (Globus sends
//!   one every 5 s), and once more when the upload ends without completing. A marker means the server has
//!   written those bytes (its page cache; `-sync-writes` makes it the disk), so a client SIGKILL or a server
//!   kill and restart both leave ranges that are really in the server's file.
//! * Past the last marker: Globus sends a marker only every 5 s, so a killed upload leaves up to 5 s of bytes
//!   on the server that no marker names. They are not trusted but checked: [`verify_tail`] compares the server's
//!   CKSM of each gap (as far as the server's file reaches) with the local file's, halving what differs, and
//!   only matching ranges count as held (a hole, zeros, or another file's bytes never match).
//! * Trust: the caller still compares the whole file's CKSM at the end and re-sends everything on a mismatch;
//!   the checkpoint is removed once the data is complete, and records older than [`MAX_AGE`] are swept.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use drsftp_proto::ranges::RangeSet;
use drsftp_storage::{ChecksumAlg, FileHandle};
use sha2::{Digest, Sha256};

use super::control::Control;
use super::resume::{write_replace, CheckpointWriter, Identity, RangeCheckpoint};
use super::verify;
use super::ClientError;
use crate::data::Progress;

/// Records older than this are removed when the next resumable upload starts.
const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// [`verify_tail`] stops halving at this (our MODE E block): what is left is sent again.
const TAIL_GRAIN: u64 = 256 << 10;
/// Most CKSM round trips [`verify_tail`] spends: a hole costs about two per halving (each half is compared).
const TAIL_PROBES: u32 = 24;
/// How often the writer looks for new markers.
const POLL: Duration = Duration::from_millis(50);

/// `$XDG_STATE_HOME/drsftp/uploads`, else `$HOME/.local/state/drsftp/uploads`; `None` if neither is set.
fn default_dir() -> Option<PathBuf> {
    super::profile::xdg_dir("XDG_STATE_HOME", ".local/state").map(|d| d.join("drsftp/uploads"))
}

/// One upload's marker checkpoint (module docs).
#[derive(Debug)]
pub(crate) struct MarkerCheckpoint {
    path: PathBuf,
    id: Identity,
    held: RangeSet,
    /// An earlier run of this upload left a record (maybe before any marker came).
    found: bool,
    note: Option<String>,
    complete: AtomicBool,
    writer: CheckpointWriter,
}

impl MarkerCheckpoint {
    /// The checkpoint of uploading a local file of version `tag` and `size` bytes to `remote` on `peer`, with
    /// what an earlier run of it left (nothing if `use_existing` is false: `--no-resume`). `None` when there is
    /// no state directory to keep it in.
    pub(crate) fn open(
        peer: &str,
        remote: &str,
        size: u64,
        tag: &str,
        use_existing: bool,
    ) -> Option<MarkerCheckpoint> {
        let dir = default_dir()?;
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!("no upload resume checkpoint in {}: {e}", dir.display());
            return None;
        }
        sweep(&dir);
        let id = Identity {
            source: format!("upload ftp://{peer}/{}", remote.trim_start_matches('/')),
            size,
            mtime: Some(tag.to_string()),
        };
        let key = Sha256::digest(format!("{}\n{size}\n{tag}", id.source).as_bytes());
        let path = dir.join(key.iter().map(|b| format!("{b:02x}")).collect::<String>());
        let mut note = None;
        let mut found = false;
        let held = match std::fs::read(&path) {
            Ok(b) => match RangeCheckpoint::decode(&b) {
                Ok(c) if c.id == id && use_existing => {
                    found = true;
                    c.held.intersect(0..size)
                }
                Ok(c) if c.id == id && !c.held.is_empty() => {
                    note = Some(
                        "--no-resume: the server's partial upload is replaced; starting afresh"
                            .into(),
                    );
                    RangeSet::new()
                }
                Ok(_) | Err(_) => RangeSet::new(),
            },
            Err(_) => RangeSet::new(),
        };
        Some(MarkerCheckpoint {
            path,
            id,
            held,
            found,
            note,
            complete: AtomicBool::new(false),
            writer: CheckpointWriter::default(),
        })
    }

    /// The ranges the server confirmed in earlier runs.
    pub(crate) fn held(&self) -> &RangeSet {
        &self.held
    }

    /// An earlier run of this upload started (its record was found): its bytes may be on the server.
    pub(crate) fn found(&self) -> bool {
        self.found
    }

    /// Adds `found`, checked by [`verify_tail`], to what is held (and saved from now on).
    pub(crate) fn add(&mut self, found: &RangeSet) {
        self.held.extend(found);
    }

    /// A note for the summary, if the checkpoint was discarded on purpose.
    pub(crate) fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Starts saving [`held`](Self::held) plus the markers `progress` collects, as they arrive.
    pub(crate) fn start(&self, progress: Arc<Progress>) {
        let (path, id, base) = (self.path.clone(), self.id.clone(), self.held.clone());
        self.writer.spawn(
            "upload-checkpoint",
            "upload checkpoint writer",
            move |halt| {
                // The first save comes at once, before any marker: a run killed before the first one still
                // leaves a record, and the rerun checks what the server has (`verify_tail`).
                let mut saved: Option<RangeSet> = None;
                let mut warned = false;
                loop {
                    let stopping = halt.load(Ordering::Relaxed);
                    let mut held = base.clone();
                    held.extend(&progress.marked());
                    if saved.as_ref() != Some(&held) {
                        let c = RangeCheckpoint {
                            id: id.clone(),
                            held: held.clone(),
                        };
                        match write_replace(&path, &c.encode(), true) {
                            Ok(()) => saved = Some(held),
                            Err(e) if !warned => {
                                tracing::warn!("cannot save {}: {e}", path.display());
                                warned = true;
                            }
                            Err(_) => {}
                        }
                    }
                    if stopping {
                        return;
                    }
                    std::thread::sleep(POLL);
                }
            },
        );
    }

    /// Every byte is on the server (or the record must not be resumed from again): drop it at the end.
    pub(crate) fn complete(&self) {
        self.complete.store(true, Ordering::Relaxed);
    }
}

impl Drop for MarkerCheckpoint {
    fn drop(&mut self) {
        self.writer.stop();
        if self.complete.load(Ordering::Relaxed) {
            remove(&self.path);
        } else if self.path.exists() {
            tracing::info!("kept the upload's restart markers: run the same copy again to resume");
        }
    }
}

/// The bytes in the gaps of `held` (within `0..size`) that the server's file `remote` already has, checked with
/// CKSM `alg` against `local` (module docs, [`TailSearch`]); empty if nothing could be checked or nothing matched.
pub(crate) async fn verify_tail(
    control: &mut Control,
    alg: ChecksumAlg,
    remote: &str,
    local: Arc<dyn FileHandle>,
    held: &RangeSet,
    size: u64,
) -> Result<RangeSet, ClientError> {
    // No file there (550), or no SIZE: nothing to check.
    let Some(there) = super::stat::size_if_any(control, remote).await? else {
        return Ok(RangeSet::new());
    };
    let mut state = (control, remote, local);
    TailSearch::run(held, size, there, &mut state, |(c, remote, local), r| {
        let local = local.clone();
        Box::pin(async move {
            match verify::compare(c, alg, remote, local, r, false, None, None).await {
                Ok(v) => Ok(v.checksum.is_some().then_some(true)),
                Err(ClientError::ChecksumMismatch { .. }) => Ok(Some(false)),
                Err(e) => Err(e),
            }
        })
    })
    .await
}

/// One comparison of [`TailSearch::run`]: `Some(true)` if both sides' checksums of the range agree, `Some(false)`
/// if they differ, `None` if they cannot be compared (a refusal: the search ends with nothing found).
pub(crate) type Probe<'a> =
    Pin<Box<dyn Future<Output = Result<Option<bool>, ClientError>> + Send + 'a>>;

/// The search behind [`verify_tail`], without I/O: which bytes past the restart markers the receiver's file
/// (`there` bytes long) already holds. Every gap in the markers that the file reaches into is compared whole;
/// a range that does not match is split in halves and each half compared again, breadth first, down to
/// [`TAIL_GRAIN`] and at most [`TAIL_PROBES`] comparisons. A hole where one of several streams lagged when the
/// sender died then costs about a grain, not everything after it (a prefix-only search lost the whole tail when
/// the hole sat right after the last marker). Third-party resume compares the source's and the destination's
/// CKSM of the same range with it.
#[derive(Debug)]
pub(crate) struct TailSearch {
    /// Ranges still to compare, oldest (widest) first.
    queue: std::collections::VecDeque<std::ops::Range<u64>>,
    matched: RangeSet,
    left: u32,
}

impl TailSearch {
    /// `None` when there is no gap, or the receiver's file reaches into none.
    pub(crate) fn new(held: &RangeSet, size: u64, there: u64) -> Option<TailSearch> {
        let queue: std::collections::VecDeque<_> = held.gaps(0..size.min(there)).into();
        (!queue.is_empty()).then(|| TailSearch {
            queue,
            matched: RangeSet::new(),
            left: TAIL_PROBES,
        })
    }

    /// The whole search: `compare` checks one range on both sides, with what `state` holds (control connections,
    /// paths); the ranges found to match (empty if none did, or nothing could be compared). A refused comparison
    /// ends the search with what matched so far.
    pub(crate) async fn run<S: Send + ?Sized>(
        held: &RangeSet,
        size: u64,
        there: u64,
        state: &mut S,
        mut compare: impl for<'a> FnMut(&'a mut S, std::ops::Range<u64>) -> Probe<'a> + Send,
    ) -> Result<RangeSet, ClientError> {
        tracing::debug!("markers {held:?} of {size} bytes; the receiver's file has {there}");
        let Some(mut search) = TailSearch::new(held, size, there) else {
            return Ok(RangeSet::new());
        };
        while let Some(r) = search.next_probe() {
            let outcome = compare(state, r.clone()).await?;
            tracing::debug!("tail range {r:?}: {outcome:?} (Some(true): the same bytes)");
            match outcome {
                Some(matched) => search.record(r, matched),
                None => break,
            }
        }
        Ok(search.found())
    }

    /// The range to compare next, `None` once the search is over.
    pub(crate) fn next_probe(&mut self) -> Option<std::ops::Range<u64>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        self.queue.pop_front()
    }

    /// Whether range `r` (from [`next_probe`](Self::next_probe)) matched: kept, or split for another look.
    pub(crate) fn record(&mut self, r: std::ops::Range<u64>, matched: bool) {
        if matched {
            self.matched.insert(r);
        } else if r.end - r.start >= 2 * TAIL_GRAIN {
            let mid = r.start + (r.end - r.start) / 2;
            self.queue.push_back(r.start..mid);
            self.queue.push_back(mid..r.end);
        }
    }

    /// The ranges that matched.
    pub(crate) fn found(self) -> RangeSet {
        tracing::debug!(
            "verified {} bytes past the restart markers",
            self.matched.covered()
        );
        self.matched
    }
}

fn remove(p: &Path) {
    if let Err(e) = std::fs::remove_file(p) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!("cannot remove {}: {e}", p.display());
        }
    }
}

/// Removes records (and stray temporaries) older than [`MAX_AGE`]: an upload never rerun leaves no lasting trace.
fn sweep(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > MAX_AGE);
        if old {
            remove(&e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives the search against a receiver whose bytes match exactly where `good` says.
    fn search(
        held: &RangeSet,
        size: u64,
        there: u64,
        good: impl Fn(&std::ops::Range<u64>) -> bool,
    ) -> (RangeSet, u32) {
        let Some(mut s) = TailSearch::new(held, size, there) else {
            return (RangeSet::new(), 0);
        };
        let mut probes = 0;
        while let Some(r) = s.next_probe() {
            probes += 1;
            let m = good(&r);
            s.record(r, m);
        }
        (s.found(), probes)
    }

    fn marked(upto: u64) -> RangeSet {
        let mut held = RangeSet::new();
        held.insert(0..upto);
        held
    }

    #[test]
    fn tail_search_finds_the_matching_prefix_within_a_grain() {
        let held = marked(8 << 20);
        let size = 64 << 20;
        // All the receiver has matches: one probe.
        let (r, n) = search(&held, size, 20 << 20, |_| true);
        let whole: std::ops::Range<u64> = (8 << 20)..(20 << 20);
        assert_eq!((r.ranges(), n), (std::slice::from_ref(&whole), 1));
        // Garbage past 13 MiB: found to within a grain, in at most TAIL_PROBES probes.
        let (r, n) = search(&held, size, 20 << 20, |r| r.end <= 13 << 20);
        assert_eq!(r.ranges().first().map(|r| r.start), Some(8 << 20), "{r:?}");
        assert!(r.covered() + TAIL_GRAIN >= 5 << 20, "{r:?}");
        assert!(r.iter().all(|r| r.end <= 13 << 20), "{r:?}");
        assert!(n <= TAIL_PROBES);
        // Nothing matches; or the receiver's file ends inside the markers.
        assert!(search(&held, size, 20 << 20, |_| false).0.is_empty());
        assert!(TailSearch::new(&held, size, 8 << 20).is_none());
    }

    #[test]
    fn a_hole_right_after_the_markers_costs_about_a_grain() {
        // One stream lagged: its block at the marker's end never arrived, the other stream's 7 MiB did.
        let held = marked(23 << 20);
        let hole = (23 << 20)..(23 << 20) + (256 << 10);
        let (r, n) = search(&held, 64 << 20, 30 << 20, |r| {
            r.end <= hole.start || r.start >= hole.end
        });
        assert!(r.iter().all(|r| r.start >= hole.end), "{r:?}");
        assert!(r.covered() + 2 * TAIL_GRAIN >= 7 << 20, "{r:?}");
        assert!(n <= TAIL_PROBES, "{n}");
        // Two holes (two lagging streams) in a gap between markers and one past them.
        let mut held = marked(4 << 20);
        held.insert((6 << 20)..(20 << 20));
        let bad = [(5 << 20)..(5 << 20) + 4096, (25 << 20)..(25 << 20) + 4096];
        let (r, n) = search(&held, 64 << 20, 30 << 20, |r| {
            bad.iter().all(|b| r.end <= b.start || r.start >= b.end)
        });
        assert!(bad
            .iter()
            .all(|b| !r.iter().any(|r| r.start < b.end && b.start < r.end)));
        assert!(r.covered() + 4 * TAIL_GRAIN >= 12 << 20, "{r:?}");
        assert!(n <= TAIL_PROBES, "{n}");
    }
}
