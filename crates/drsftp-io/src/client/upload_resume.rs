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
//!   CKSM of the first gap's prefix (as far as the server's file reaches) with the local file's, halving it until
//!   one matches, and only a matching prefix counts as held (a hole, zeros, or another file's bytes never match).
//! * Trust: the caller still compares the whole file's CKSM at the end and re-sends everything on a mismatch;
//!   the checkpoint is removed once the data is complete, and records older than [`MAX_AGE`] are swept.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use drsftp_proto::ranges::RangeSet;
use drsftp_storage::{ChecksumAlg, FileHandle};
use sha2::{Digest, Sha256};

use super::control::Control;
use super::resume::{write_replace, Identity, RangeCheckpoint};
use super::verify;
use super::ClientError;
use crate::data::Progress;

/// Records older than this are removed when the next resumable upload starts.
const MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// [`verify_tail`] stops halving below this (our MODE E block): what is left is sent again.
const TAIL_GRAIN: u64 = 256 << 10;
/// Most CKSM round trips [`verify_tail`] spends.
const TAIL_PROBES: u32 = 8;
/// How often the writer looks for new markers.
const POLL: Duration = Duration::from_millis(50);
/// Longest an ending upload waits for its last save.
const FINAL_WAIT: Duration = Duration::from_secs(5);

/// `$XDG_STATE_HOME/drsftp/uploads`, else `$HOME/.local/state/drsftp/uploads`; `None` if neither is set.
fn default_dir() -> Option<PathBuf> {
    let nonempty = |k| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    nonempty("XDG_STATE_HOME")
        .or_else(|| nonempty("HOME").map(|h| h.join(".local/state")))
        .map(|d| d.join("drsftp/uploads"))
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
    writer: Mutex<Option<(Receiver<()>, Arc<AtomicBool>)>>,
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
            writer: Mutex::new(None),
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

    /// Adds `r`, checked by [`verify_tail`], to what is held (and saved from now on).
    pub(crate) fn add(&mut self, r: std::ops::Range<u64>) {
        self.held.insert(r);
    }

    /// A note for the summary, if the checkpoint was discarded on purpose.
    pub(crate) fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// Starts saving [`held`](Self::held) plus the markers `progress` collects, as they arrive.
    pub(crate) fn start(&self, progress: Arc<Progress>) {
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let (path, id, base) = (self.path.clone(), self.id.clone(), self.held.clone());
        let spawned = std::thread::Builder::new()
            .name("upload-checkpoint".into())
            .spawn(move || {
                let _done = done_tx;
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
            });
        match spawned {
            Ok(_) => {
                if let Ok(mut w) = self.writer.lock() {
                    *w = Some((done_rx, stop));
                }
            }
            Err(e) => tracing::warn!("no upload checkpoint writer: {e}"),
        }
    }

    /// Every byte is on the server (or the record must not be resumed from again): drop it at the end.
    pub(crate) fn complete(&self) {
        self.complete.store(true, Ordering::Relaxed);
    }

    fn stop_writer(&self) {
        if let Some((done, stop)) = self.writer.lock().ok().and_then(|mut w| w.take()) {
            stop.store(true, Ordering::Relaxed);
            let _ = done.recv_timeout(FINAL_WAIT);
        }
    }
}

impl Drop for MarkerCheckpoint {
    fn drop(&mut self) {
        self.stop_writer();
        if self.complete.load(Ordering::Relaxed) {
            remove(&self.path);
        } else if self.path.exists() {
            tracing::info!("kept the upload's restart markers: run the same copy again to resume");
        }
    }
}

/// The longest prefix of the first gap in `held` (within `0..size`) whose bytes the server's file `remote`
/// already has, checked with CKSM `alg` against `local` (module docs, [`TailSearch`]). `None` if nothing could be
/// checked or nothing matched.
pub(crate) async fn verify_tail(
    control: &mut Control,
    alg: ChecksumAlg,
    remote: &str,
    local: Arc<dyn FileHandle>,
    held: &RangeSet,
    size: u64,
) -> Result<Option<std::ops::Range<u64>>, ClientError> {
    // No file there (550), or no SIZE: nothing to check.
    let there = match super::size(control, remote).await {
        Ok(n) => n,
        Err(e) if e.reply_code().is_some() => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(mut search) = TailSearch::new(held, size, there) else {
        return Ok(None);
    };
    while let Some(r) = search.next_probe() {
        match verify::compare(control, alg, remote, local.clone(), r, false, None).await {
            Ok(v) if v.checksum.is_some() => search.record(true),
            Ok(_) => return Ok(None),
            Err(ClientError::ChecksumMismatch { .. }) => search.record(false),
            Err(e) => return Err(e),
        }
    }
    Ok(search.found())
}

/// The bisection behind [`verify_tail`], without I/O: the bytes past the last restart marker that the receiver's
/// file (`there` bytes long) may already hold, found by comparing checksums of prefixes of the first gap, halving
/// down to [`TAIL_GRAIN`] in at most [`TAIL_PROBES`] comparisons. Third-party resume compares the source's and the
/// destination's CKSM of the same range with it.
#[derive(Debug)]
pub(crate) struct TailSearch {
    start: u64,
    /// `start..start + good` matches, `start + bad` does not (or is untested).
    good: u64,
    bad: u64,
    probe: u64,
    left: u32,
}

impl TailSearch {
    /// `None` when there is no gap, or the receiver's file reaches less than one grain into it.
    pub(crate) fn new(held: &RangeSet, size: u64, there: u64) -> Option<TailSearch> {
        let gap = held.gaps(0..size).into_iter().next()?;
        let end = gap.end.min(there);
        if end < gap.start + TAIL_GRAIN {
            return None;
        }
        let len = end - gap.start;
        Some(TailSearch {
            start: gap.start,
            good: 0,
            bad: len + 1,
            probe: len,
            left: TAIL_PROBES,
        })
    }

    /// The range to compare next, `None` once the search is over.
    pub(crate) fn next_probe(&self) -> Option<std::ops::Range<u64>> {
        (self.left > 0 && self.bad - self.good > TAIL_GRAIN)
            .then(|| self.start..self.start + self.probe)
    }

    /// Whether the range [`next_probe`](Self::next_probe) gave matched.
    pub(crate) fn record(&mut self, matched: bool) {
        if matched {
            self.good = self.probe;
        } else {
            self.bad = self.probe;
        }
        self.left -= 1;
        self.probe = self.good + (self.bad - self.good) / 2;
    }

    /// The checked prefix, if any matched.
    pub(crate) fn found(&self) -> Option<std::ops::Range<u64>> {
        tracing::debug!("verified {} bytes past the last restart marker", self.good);
        (self.good > 0).then(|| self.start..self.start + self.good)
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

    /// Drives the search against a receiver whose bytes match up to `truth`.
    fn search(
        held: &RangeSet,
        size: u64,
        there: u64,
        truth: u64,
    ) -> (Option<std::ops::Range<u64>>, u32) {
        let Some(mut s) = TailSearch::new(held, size, there) else {
            return (None, 0);
        };
        let mut probes = 0;
        while let Some(r) = s.next_probe() {
            probes += 1;
            s.record(r.end <= truth);
        }
        (s.found(), probes)
    }

    #[test]
    fn tail_search_finds_the_matching_prefix_within_a_grain() {
        let mut held = RangeSet::new();
        held.insert(0..(8 << 20));
        let size = 64 << 20;
        // All the receiver has matches: one probe.
        assert_eq!(
            search(&held, size, 20 << 20, 20 << 20),
            (Some((8 << 20)..(20 << 20)), 1)
        );
        // Garbage past 13 MiB: found to within a grain, in at most TAIL_PROBES probes.
        let (r, n) = search(&held, size, 20 << 20, 13 << 20);
        let r = r.unwrap();
        assert!(
            r.start == 8 << 20 && r.end <= 13 << 20 && r.end + TAIL_GRAIN >= 13 << 20,
            "{r:?}"
        );
        assert!(n <= TAIL_PROBES);
        // Nothing matches; or the receiver's file ends before a grain of the gap.
        assert_eq!(search(&held, size, 20 << 20, 0).0, None);
        assert!(TailSearch::new(&held, size, (8 << 20) + 1000).is_none());
    }
}
