//! Multi-file jobs (`drsftp copy -r`, `--files-from`): a [`Job`] is the list of directories to create and files to
//! move between one source and one destination (local or a server each), found by walking trees ([`plan_tree`])
//! or given as pairs; [`run`] moves the files over a pool of control sessions with per-file stream counts, sync
//! skips, retries with backoff, and one shared [`JobProgress`]. The decisions are pure functions in [`plan`]; this
//! module and `walk`/`run` do the I/O.

mod auto;
mod batch;
pub mod plan;
mod relay;
mod run;
mod upbatch;
mod walk;
mod warm;

use std::fmt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{ClientOptions, TransferSummary};
use crate::data::Progress;
use crate::tls::TlsSettings;
use plan::{RetryPolicy, SyncMode};

pub use run::run;
pub use walk::plan_tree;
pub use warm::Warm;

/// A server to log in to: `host:port` and credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// `host:port`.
    pub authority: String,
    /// Login name.
    pub user: String,
    /// Password.
    pub pass: String,
}

/// One end of a file or directory: a local path or a path on the job's server of that side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loc {
    /// A local path.
    Local(PathBuf),
    /// An absolute path on the server.
    Remote(String),
}

impl Loc {
    /// `self` with one more component (already checked by [`plan::safe_component`]).
    pub fn join(&self, name: &str) -> Loc {
        match self {
            Loc::Local(p) => Loc::Local(p.join(name)),
            Loc::Remote(p) if p.ends_with('/') => Loc::Remote(format!("{p}{name}")),
            Loc::Remote(p) => Loc::Remote(format!("{p}/{name}")),
        }
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Loc::Local(p) => write!(f, "{}", p.display()),
            Loc::Remote(p) => f.write_str(p),
        }
    }
}

/// One file to move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileTask {
    /// Where it is.
    pub src: Loc,
    /// Where it goes (the file itself, not its directory).
    pub dst: Loc,
    /// The source's size, if known from the walk (else asked before the copy).
    pub size: Option<u64>,
    /// The source's modification time (Unix seconds), if known.
    pub mtime: Option<i64>,
}

/// What a job moves. Every `Loc::Remote` of a side refers to that side's server.
#[derive(Debug, Clone, Default)]
pub struct Job {
    /// The source server (`None`: the source is local).
    pub src_server: Option<Server>,
    /// The destination server (`None`: the destination is local).
    pub dst_server: Option<Server>,
    /// Destination directories to create first, parents before children (empty source directories included).
    pub dirs: Vec<Loc>,
    /// The files.
    pub files: Vec<FileTask>,
    /// What the walk left out and why (symlinks leaving the tree, unsafe names, special files).
    pub notes: Vec<String>,
    /// Sessions logged in during the walk for the workers to start on (empty for a job built without one).
    pub warm: Warm,
}

/// How a job runs.
#[derive(Debug, Clone)]
pub struct JobOptions {
    /// Per-transfer options: buffers, verification, timeout, blast. `streams` is the most any file gets.
    pub transfer: ClientOptions,
    /// Choose the stream count per session with `-p auto`'s start choice (then scaled down per file size).
    pub auto_streams: bool,
    /// Control sessions (pairs of them for third-party copies) moving files at once; `None`: from the files
    /// ([`plan::auto_concurrency`]).
    pub concurrency: Option<usize>,
    /// What lets a file be skipped.
    pub sync: SyncMode,
    /// Retries of transient failures.
    pub retry: RetryPolicy,
    /// TLS for every control connection.
    pub tls: TlsSettings,
}

/// The whole job's counters, for one progress display.
#[derive(Debug, Default)]
pub struct JobProgress {
    files_total: AtomicU64,
    files_done: AtomicU64,
    files_failed: AtomicU64,
    bytes_total: AtomicU64,
    bytes_done: AtomicU64,
    active: Mutex<Vec<Arc<Progress>>>,
}

impl JobProgress {
    /// Files in the job.
    pub fn files_total(&self) -> u64 {
        self.files_total.load(Ordering::Relaxed)
    }
    /// Files finished (copied or skipped).
    pub fn files_done(&self) -> u64 {
        self.files_done.load(Ordering::Relaxed)
    }
    /// Files given up on.
    pub fn files_failed(&self) -> u64 {
        self.files_failed.load(Ordering::Relaxed)
    }
    /// Bytes the job expects to move (skipped files' sizes are taken off as they are skipped).
    pub fn bytes_total(&self) -> u64 {
        self.bytes_total.load(Ordering::Relaxed)
    }
    /// Bytes moved so far: finished files plus what running transfers have moved.
    pub fn bytes(&self) -> u64 {
        let live: u64 = self
            .active
            .lock()
            .map(|a| a.iter().map(|p| p.bytes()).sum())
            .unwrap_or(0);
        self.bytes_done.load(Ordering::Relaxed) + live
    }

    /// A fresh transfer's progress, counted in the job's live bytes until the guard is dropped.
    pub(super) fn shown(&self) -> Shown<'_> {
        let p = Arc::new(Progress::new());
        if let Ok(mut a) = self.active.lock() {
            a.push(p.clone());
        }
        Shown { set: self, p }
    }
}

/// See [`JobProgress::shown`].
pub(super) struct Shown<'a> {
    set: &'a JobProgress,
    p: Arc<Progress>,
}

impl Shown<'_> {
    /// The transfer's progress, to hand to it.
    pub(super) fn progress(&self) -> Arc<Progress> {
        self.p.clone()
    }
}

impl Drop for Shown<'_> {
    fn drop(&mut self) {
        if let Ok(mut a) = self.set.active.lock() {
            a.retain(|p| !Arc::ptr_eq(p, &self.p));
        }
    }
}

/// How one file ended.
#[derive(Debug, Clone, PartialEq)]
pub enum FileStatus {
    /// Moved and checked.
    Copied,
    /// The destination already held it (the reason names the sync mode's test).
    Skipped(String),
    /// Given up on after its attempts.
    Failed,
}

/// One file's result.
#[derive(Debug, Clone)]
pub struct FileRecord {
    /// The source.
    pub src: Loc,
    /// The destination.
    pub dst: Loc,
    /// Copied, skipped, failed.
    pub status: FileStatus,
    /// Attempts made (0 for a skip).
    pub attempts: u32,
    /// The successful transfer's summary.
    pub summary: Option<TransferSummary>,
    /// The last error, for a failed file (and a copied file that needed retries: what they were for).
    pub error: Option<String>,
    /// Remarks: a modification time that could not be kept, a stale part file removed.
    pub notes: Vec<String>,
}

/// What a job did.
#[derive(Debug, Clone)]
pub struct JobReport {
    /// One record per file, in the job's order.
    pub records: Vec<FileRecord>,
    /// The walk's notes and job-wide remarks (directories that could not be created).
    pub notes: Vec<String>,
    /// Sessions used.
    pub concurrency: usize,
    /// Wall-clock seconds of the transfer phase.
    pub seconds: f64,
}

impl JobReport {
    /// Payload bytes moved by the copied files.
    pub fn bytes(&self) -> u64 {
        self.records
            .iter()
            .filter_map(|r| r.summary.as_ref())
            .map(|s| s.bytes)
            .sum()
    }
    /// Records with the given status kind.
    pub fn count(&self, f: impl Fn(&FileStatus) -> bool) -> usize {
        self.records.iter().filter(|r| f(&r.status)).count()
    }
}
