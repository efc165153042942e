//! A resumable upload on the server (docs/resume.md "Upload resume"): a MODE E `STOR` armed with `SITE PARTIAL`
//! writes into the user's kept partial (`drsftp_storage::kept`) instead of a throw-away part file, and records
//! which byte ranges are on disk while it runs, so a transfer that dies (the client killed, the connection lost,
//! this server killed) leaves a partial a rerun continues.
//!
//! * Start: the ranges the client claims with `REST` count only where the kept checkpoint holds them too; a
//!   client cannot make the server commit bytes it never received.
//! * While data arrives: a checkpoint (sync the part file, then write the ranges) once [`STEP`] of the file
//!   (at least [`MIN_STEP`]) arrived since the last one, or after [`EVERY`] with anything new.
//! * End: committed (renamed to the destination) only when the ranges held cover the whole announced size;
//!   otherwise, and when the transfer is dropped mid-way, the ranges are saved once more and the partial stays.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drsftp_proto::ranges::RangeSet;
use drsftp_storage::{FileHandle, PartFile};

use crate::data::{DataError, DataReport, Progress};
use crate::task::AbortOnDrop;

/// A checkpoint once this share of the file arrived since the last one (1/200 = 0.5 %), so a kill costs at most
/// about that much again, as for downloads (client/resume.rs).
const STEP: u64 = 200;
const MIN_STEP: u64 = 64 << 10;
/// A checkpoint at least this often while bytes arrive.
const EVERY: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(20);

/// The part file and what this transfer started from.
struct Saver {
    part: Mutex<Option<Box<dyn PartFile>>>,
    start: RangeSet,
    progress: Arc<Progress>,
}

impl Saver {
    fn held(&self, arrived: &RangeSet) -> RangeSet {
        let mut h = self.start.clone();
        h.extend(arrived);
        h
    }

    /// Records `held` (blocking: syncs the part file).
    fn save(&self, held: &RangeSet) {
        let part = self.part.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = part.as_ref() {
            if let Err(e) = p.save_held(&held.to_string()) {
                tracing::warn!("cannot record a kept partial upload: {e}");
            }
        }
    }
}

/// One resumable upload in progress (module docs).
pub(super) struct KeptUpload {
    saver: Arc<Saver>,
    handle: Arc<dyn FileHandle>,
    size: u64,
    ticker: AbortOnDrop<()>,
    finished: bool,
}

impl KeptUpload {
    /// Starts from the kept `held` ranges (checkpoint text), limited to what the client `claimed` with `REST`.
    pub(super) fn start(
        part: Box<dyn PartFile>,
        held: &str,
        claimed: Option<RangeSet>,
        size: u64,
        progress: Arc<Progress>,
    ) -> KeptUpload {
        let held = RangeSet::parse(held).unwrap_or_default().intersect(0..size);
        let start = match claimed {
            // held ∩ claimed: what the server has and the client will not send again.
            Some(c) => held.difference(&held.difference(&c)),
            None => RangeSet::new(),
        };
        let handle = part.handle();
        let saver = Arc::new(Saver {
            part: Mutex::new(Some(part)),
            start,
            progress,
        });
        let ticker = AbortOnDrop::spawn(tick(saver.clone(), size));
        KeptUpload {
            saver,
            handle,
            size,
            ticker,
            finished: false,
        }
    }

    /// Where the blocks go.
    pub(super) fn handle(&self) -> Arc<dyn FileHandle> {
        self.handle.clone()
    }

    /// The bytes this transfer did not need (held at the start).
    pub(super) fn resumed(&self) -> u64 {
        self.saver.start.covered()
    }

    /// Commits if the whole size is now held; otherwise saves the ranges and keeps the partial.
    pub(super) async fn finish(
        mut self,
        r: Result<DataReport, DataError>,
    ) -> Result<DataReport, DataError> {
        self.finished = true;
        if let Some(t) = self.ticker.0.take() {
            t.abort();
            let _ = t.await;
        }
        let arrived = match &r {
            Ok(rep) => rep.ranges.clone(),
            Err(_) => self.saver.progress.ranges(),
        };
        let held = self.saver.held(&arrived);
        let size = self.size;
        let len = self.handle.len().unwrap_or(0);
        let complete = r.is_ok() && held.gaps(0..size).is_empty() && len == size;
        let saver = self.saver.clone();
        let covered = held.covered();
        let missing = RangeSet::from_iter(held.gaps(0..size));
        tokio::task::spawn_blocking(move || {
            if complete {
                let part = saver.part.lock().unwrap_or_else(|p| p.into_inner()).take();
                match part {
                    Some(p) => p.commit().map_err(DataError::Storage),
                    None => Err(DataError::Incomplete("the kept partial is gone".into())),
                }
            } else {
                saver.save(&held);
                Ok(())
            }
        })
        .await
        .map_err(|e| DataError::Io(std::io::Error::other(e.to_string())))??;
        let rep = r?;
        if complete {
            Ok(rep)
        } else {
            Err(DataError::Incomplete(format!(
                "the file is not complete: {} of {size} bytes held ({}); kept for a resumed upload",
                covered,
                if len > size {
                    "data past the announced size".to_string()
                } else {
                    format!("missing {missing}")
                }
            )))
        }
    }
}

impl Drop for KeptUpload {
    /// The transfer was dropped mid-way (its session ended): record what arrived, off the async threads.
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let saver = self.saver.clone();
        let save = move || {
            let held = saver.held(&saver.progress.ranges());
            saver.save(&held);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => drop(h.spawn_blocking(save)),
            Err(_) => save(),
        }
    }
}

/// Saves a checkpoint as bytes arrive (module docs).
async fn tick(saver: Arc<Saver>, size: u64) {
    let step = (size / STEP).max(MIN_STEP);
    let mut saved = saver.progress.bytes();
    let mut at = Instant::now();
    loop {
        tokio::time::sleep(POLL).await;
        let now = saver.progress.bytes();
        if now == saved || (now - saved < step && at.elapsed() < EVERY) {
            continue;
        }
        let held = saver.held(&saver.progress.ranges());
        saved = now;
        at = Instant::now();
        let s = saver.clone();
        let _ = tokio::task::spawn_blocking(move || s.save(&held)).await;
    }
}
