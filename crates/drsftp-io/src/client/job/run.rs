//! Running a [`Job`]: destination directories first, then workers (one control session each, a pair for
//! third-party copies) take files from a shared queue. Each file: the sync test, a transfer with as many streams as
//! its size deserves, the modification time kept (local `set_modified` on download, `MFMT` where the server lists
//! it), and retries with backoff for transient failures (the session is reconnected). A failed file is recorded and
//! the job goes on.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, UNIX_EPOCH};

use super::plan::{self, Meta, SyncMode, SyncVerdict};
use super::walk::mtime_of;
use super::warm::{Side, Slot};
use super::{
    FileRecord, FileStatus, FileTask, Job, JobOptions, JobProgress, JobReport, Loc, Server,
};
use crate::client::profile::ProfileStore;
use crate::client::{Client, ClientError, TransferSummary};
use crate::data::Progress;

/// Logs in to `server` with the job's TLS settings and timeout.
pub(super) async fn connect(server: &Server, opts: &JobOptions) -> Result<Client, ClientError> {
    Client::connect_tls(
        &server.authority,
        &server.user,
        &server.pass,
        opts.transfer.timeout,
        &opts.tls,
    )
    .await
}

/// [`connect`], retried on transient failures as the job's policy says.
pub(super) async fn connect_retrying(
    server: &Server,
    opts: &JobOptions,
) -> Result<Client, ClientError> {
    let mut retry = 0;
    loop {
        match connect(server, opts).await {
            Ok(c) => return Ok(c),
            Err(e) if transient(&e) => {
                retry += 1;
                let Some(d) = opts.retry.delay(retry) else {
                    return Err(e);
                };
                tracing::warn!(
                    "logging in to {}: {e}; retry {retry} in {d:?}",
                    server.authority
                );
                tokio::time::sleep(d).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether a failure may go away on its own: connection and data-channel failures, stalls, timeouts, 4xx replies,
/// and a size or checksum mismatch (the data was damaged on the way). Refusals (5xx), local file errors and
/// invalid requests are not retried.
pub fn transient(e: &ClientError) -> bool {
    match e {
        ClientError::Connect { .. }
        | ClientError::Control(_)
        | ClientError::DataSetup(_)
        | ClientError::Data(_)
        | ClientError::Stalled(_)
        | ClientError::SizeMismatch { .. }
        | ClientError::ChecksumMismatch { .. } => true,
        ClientError::Session(s) => s.reply_code().map_or(s.is_fatal(), plan::transient_reply),
        _ => false,
    }
}

/// What every worker shares.
pub(super) struct Shared {
    pub(super) job: Job,
    pub(super) opts: JobOptions,
    pub(super) progress: Arc<JobProgress>,
    next: AtomicUsize,
    records: Mutex<Vec<Option<FileRecord>>>,
    concurrency: usize,
    /// `--transport auto`: what earlier files found out about the path (`auto::learn`).
    verdict: Mutex<Option<crate::client::CarriedVerdict>>,
}

/// One worker's sessions. `streams`: what this worker's files may use at most (the `-p auto` choice or `-p N`).
#[derive(Default)]
pub(super) struct Worker {
    pub(super) src: Option<Client>,
    pub(super) dst: Option<Client>,
    streams: Option<u32>,
    /// TLS data channels: stream mode only.
    pub(super) protected: bool,
    /// The source server cannot take batches (no MODE E).
    pub(super) no_batch: bool,
    /// The destination server cannot take upload batches (no MODE E).
    pub(super) no_upbatch: bool,
    /// One of the two servers cannot take third-party batches (no MODE E).
    pub(super) no_relay: bool,
    /// Destination directories this worker listed for `--sync` (third-party batches): listed once, since a
    /// listing's PASV would end the data channel the batches keep.
    pub(super) listed: HashMap<String, HashMap<String, Meta>>,
}

impl Worker {
    async fn quit(&mut self) {
        for c in [self.src.take(), self.dst.take()].into_iter().flatten() {
            if let Err(e) = c.quit().await {
                tracing::debug!("QUIT: {e}");
            }
        }
    }
}

/// Runs `job`: see the module docs. Never fails as a whole; failed files are in the report.
pub async fn run(job: Job, opts: &JobOptions, progress: Arc<JobProgress>) -> JobReport {
    let n = job.files.len();
    let known: u64 = job.files.iter().filter_map(|f| f.size).sum();
    progress.files_total.store(n as u64, Ordering::Relaxed);
    progress.bytes_total.store(known, Ordering::Relaxed);
    let mut notes = job.notes.clone();
    make_dirs(&job, opts, &mut notes).await;
    let concurrency = opts
        .concurrency
        .unwrap_or_else(|| plan::auto_concurrency(n, known))
        .clamp(1, n.max(1));
    let t0 = Instant::now();
    let shared = Arc::new(Shared {
        job,
        opts: opts.clone(),
        progress,
        next: AtomicUsize::new(0),
        records: Mutex::new(vec![None; n]),
        concurrency,
        verdict: Mutex::new(None),
    });
    let mut set = tokio::task::JoinSet::new();
    let warm = shared.job.warm.clone();
    for _ in 0..concurrency {
        let src = warm.take(Side::Src);
        let dst = warm.take(Side::Dst);
        set.spawn(worker(shared.clone(), src, dst));
    }
    // Sessions warmed for more workers than the files need end alongside the job.
    let closing = tokio::spawn(async move { warm.close().await });
    while let Some(r) = set.join_next().await {
        if let Err(e) = r {
            notes.push(format!("a worker ended abnormally: {e}"));
        }
    }
    let _ = closing.await;
    let seconds = t0.elapsed().as_secs_f64();
    let records = shared
        .records
        .lock()
        .map(|mut r| std::mem::take(&mut *r))
        .unwrap_or_default();
    let records = records
        .into_iter()
        .zip(&shared.job.files)
        .map(|(r, f)| {
            r.unwrap_or_else(|| FileRecord {
                src: f.src.clone(),
                dst: f.dst.clone(),
                status: FileStatus::Failed,
                attempts: 0,
                summary: None,
                error: Some("not attempted".into()),
                notes: vec![],
            })
        })
        .collect();
    JobReport {
        records,
        notes,
        concurrency,
        seconds,
    }
}

/// Creates the destination directories, parents first; on a server, every prefix of the first one too. A
/// directory that exists already is fine; one that cannot be made shows up as its files' failures.
async fn make_dirs(job: &Job, opts: &JobOptions, notes: &mut Vec<String>) {
    let mut remote = Vec::new();
    for d in &job.dirs {
        match d {
            Loc::Local(p) => {
                if let Err(e) = std::fs::create_dir_all(p) {
                    notes.push(format!("{}: cannot create the directory: {e}", p.display()));
                }
            }
            Loc::Remote(p) => remote.push(p.as_str()),
        }
    }
    let (Some(first), Some(server)) = (remote.first(), &job.dst_server) else {
        return;
    };
    let mut client = match connect_retrying(server, opts).await {
        Ok(c) => c,
        Err(e) => {
            notes.push(format!("creating directories on {}: {e}", server.authority));
            return;
        }
    };
    let mut paths: Vec<String> = Vec::new();
    let mut prefix = String::new();
    for part in first.split('/').filter(|s| !s.is_empty()) {
        prefix.push('/');
        prefix.push_str(part);
        paths.push(prefix.clone());
    }
    paths.extend(remote[1..].iter().map(|s| s.to_string()));
    for p in paths {
        // 550/521 "exists" is the common answer for the prefixes; a real refusal fails the files inside.
        match client.command(&format!("MKD {p}")).await {
            Ok(r) => tracing::debug!("MKD {p}: {r}"),
            Err(e) if e.reply_code().is_some() => tracing::debug!("MKD {p}: {e}"),
            Err(e) => {
                notes.push(format!("creating {p}: {e}"));
                return;
            }
        }
    }
    if let Err(e) = client.quit().await {
        tracing::debug!("QUIT: {e}");
    }
}

async fn worker(shared: Arc<Shared>, src: Option<Slot>, dst: Option<Slot>) {
    let mut w = Worker::default();
    if let Some(s) = src {
        w.src = s.session().await;
    }
    if let Some(d) = dst {
        w.dst = d.session().await;
    }
    // A file taken from the queue that did not fit the batch being gathered.
    let mut held = None;
    loop {
        let i = held
            .take()
            .unwrap_or_else(|| shared.next.fetch_add(1, Ordering::Relaxed));
        let Some(task) = shared.job.files.get(i) else {
            break;
        };
        // Small downloads, uploads and third-party copies go in batches (a job has one direction).
        let fits: Option<fn(&Shared, &Worker, &FileTask) -> bool> =
            if super::batch::eligible(&shared, &w, task) {
                Some(super::batch::eligible)
            } else if super::upbatch::eligible(&shared, &w, task) {
                Some(super::upbatch::eligible)
            } else if super::relay::eligible(&shared, &w, task) {
                Some(super::relay::eligible)
            } else {
                None
            };
        if let Some(fits) = fits {
            // An even share of what is left, so the last files still spread over the workers.
            let left = shared.job.files.len().saturating_sub(i);
            let want = left
                .div_ceil(shared.concurrency)
                .clamp(1, plan::BATCH_FILES);
            let mut idx = vec![i];
            while idx.len() < want {
                let j = shared.next.fetch_add(1, Ordering::Relaxed);
                match shared.job.files.get(j) {
                    Some(t) if fits(&shared, &w, t) => idx.push(j),
                    Some(_) => {
                        held = Some(j);
                        break;
                    }
                    None => break,
                }
            }
            match (&task.src, &task.dst) {
                (Loc::Local(_), _) => super::upbatch::run(&mut w, &shared, &idx).await,
                (_, Loc::Remote(_)) => super::relay::run(&mut w, &shared, &idx).await,
                _ => super::batch::run(&mut w, &shared, &idx).await,
            }
            continue;
        }
        let rec = one_file(&mut w, &shared, task).await;
        store(&shared, i, rec);
    }
    w.quit().await;
}

/// Counts file `i`'s outcome in the job's progress and keeps its record.
pub(super) fn store(shared: &Shared, i: usize, rec: FileRecord) {
    let p = &shared.progress;
    match rec.status {
        FileStatus::Failed => {
            p.files_failed.fetch_add(1, Ordering::Relaxed);
            if let Some(s) = shared.job.files.get(i).and_then(|t| t.size) {
                p.bytes_total
                    .fetch_sub(s.min(p.bytes_total()), Ordering::Relaxed);
            }
        }
        _ => {
            p.files_done.fetch_add(1, Ordering::Relaxed);
        }
    }
    if let Ok(mut r) = shared.records.lock() {
        r[i] = Some(rec);
    }
}

/// What an attempt ended in.
enum Done {
    Copied(Box<TransferSummary>, Vec<String>),
    Skipped(String),
}

/// One file, with its retries.
pub(super) async fn one_file(w: &mut Worker, shared: &Shared, task: &FileTask) -> FileRecord {
    let mut attempts = 0;
    let mut errors: Vec<String> = Vec::new();
    loop {
        attempts += 1;
        let shown = shared.progress.shown();
        let r = attempt(w, shared, task, shown.progress()).await;
        drop(shown);
        let record = |status, summary, error, notes| FileRecord {
            src: task.src.clone(),
            dst: task.dst.clone(),
            status,
            attempts,
            summary,
            error,
            notes,
        };
        match r {
            Ok(Done::Copied(s, notes)) => {
                shared
                    .progress
                    .bytes_done
                    .fetch_add(s.bytes, Ordering::Relaxed);
                let error = (!errors.is_empty()).then(|| errors.join("; "));
                return record(FileStatus::Copied, Some(*s), error, notes);
            }
            Ok(Done::Skipped(why)) => {
                let total = &shared.progress.bytes_total;
                if let Some(s) = task.size {
                    total.fetch_sub(s.min(total.load(Ordering::Relaxed)), Ordering::Relaxed);
                }
                let mut r = record(FileStatus::Skipped(why), None, None, vec![]);
                r.attempts = 0;
                return r;
            }
            Err(e) => {
                let again = transient(&e);
                // After anything but a plain refusal the control connection may be out of step or gone.
                if again || e.reply_code().is_none() {
                    w.src = None;
                    w.dst = None;
                }
                errors.push(e.to_string());
                match shared.opts.retry.delay(attempts).filter(|_| again) {
                    Some(d) => {
                        tracing::warn!("{}: {e}; retry {attempts} in {d:?}", task.src);
                        tokio::time::sleep(d).await;
                    }
                    None => {
                        return record(FileStatus::Failed, None, errors.pop(), vec![]);
                    }
                }
            }
        }
    }
}

/// The logged-in session in `slot`, connecting (and for the data-moving side, choosing `-p auto`'s start) first.
pub(super) async fn session<'a>(
    slot: &'a mut Option<Client>,
    server: Option<&Server>,
    opts: &JobOptions,
) -> Result<&'a mut Client, ClientError> {
    if slot.is_none() {
        let server =
            server.ok_or_else(|| ClientError::Invalid("no server for a remote path".into()))?;
        *slot = Some(connect(server, opts).await?);
    }
    slot.as_mut()
        .ok_or_else(|| ClientError::Invalid("no session".into()))
}

/// The stream cap of this worker: `-p N`, or `-p auto`'s start choice on `client` (once per worker).
async fn streams_cap(
    w: &mut Worker,
    client: &mut Client,
    server: &Server,
    opts: &JobOptions,
) -> u32 {
    if client.data_protected() {
        w.protected = true;
    }
    if let Some(s) = w.streams {
        return s;
    }
    let s = if opts.auto_streams && !w.protected {
        let store = ProfileStore::open(None);
        match client
            .choose_start(&server.authority, store.as_ref(), opts.transfer.buffer)
            .await
        {
            Ok(c) => c.start.streams,
            Err(e) => {
                tracing::warn!("-p auto: {e}; using {} stream(s)", opts.transfer.streams);
                opts.transfer.streams
            }
        }
    } else {
        opts.transfer.streams
    };
    w.streams = Some(s.max(1));
    s.max(1)
}

/// Size and mtime of a local file, `None` if it is not a regular file.
pub(super) fn local_meta(p: &Path) -> Option<Meta> {
    let m = std::fs::metadata(p).ok().filter(|m| m.is_file())?;
    Some(Meta {
        size: Some(m.len()),
        mtime: mtime_of(&m),
    })
}

/// Size (and, if `with_time`, MDTM) of a remote file; `None` if the server says it is not there (5xx).
async fn remote_meta(
    c: &mut Client,
    path: &str,
    with_time: bool,
) -> Result<Option<Meta>, ClientError> {
    let size = match c.size(path).await {
        Ok(s) => s,
        Err(e) if e.reply_code().is_some_and(|c| c >= 500) => return Ok(None),
        Err(e) => return Err(e),
    };
    let mtime = if with_time {
        match c.command(&format!("MDTM {path}")).await {
            Ok(r) if r.starts_with("213") => {
                r.split_whitespace().nth(1).and_then(plan::parse_modify)
            }
            Ok(_) => None,
            Err(e) if e.reply_code().is_some() => None,
            Err(e) => return Err(e),
        }
    } else {
        None
    };
    Ok(Some(Meta {
        size: Some(size),
        mtime,
    }))
}

/// The checksum of a whole local file, lower-case hex.
async fn local_checksum(p: &Path, alg: drsftp_storage::ChecksumAlg) -> Result<String, ClientError> {
    let p = p.to_path_buf();
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut f = std::fs::File::open(&p).map_err(|e| ClientError::local(&p, e))?;
        let mut c = drsftp_storage::Checksummer::new(alg);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = f.read(&mut buf).map_err(|e| ClientError::local(&p, e))?;
            if n == 0 {
                return Ok(c.finish().to_ascii_lowercase());
            }
            c.update(&buf[..n]);
        }
    })
    .await
    .map_err(|e| ClientError::Invalid(format!("checksum task: {e}")))?
}

/// One try at one file: the sync test, then the copy.
async fn attempt(
    w: &mut Worker,
    shared: &Shared,
    task: &FileTask,
    progress: Arc<Progress>,
) -> Result<Done, ClientError> {
    let (opts, job) = (&shared.opts, &shared.job);
    let need_time = true; // downloads and MFMT keep the source's time; mtime sync compares it
                          // The source's facts: from the walk, else asked now.
    let src_meta = match (&task.src, task.size, task.mtime) {
        (_, Some(size), Some(mtime)) => Meta {
            size: Some(size),
            mtime: Some(mtime),
        },
        (Loc::Local(p), ..) => local_meta(p)
            .ok_or_else(|| ClientError::local(p, std::io::Error::other("not a regular file")))?,
        (Loc::Remote(p), ..) => {
            let c = session(&mut w.src, job.src_server.as_ref(), opts).await?;
            let m = remote_meta(c, p, need_time).await?.ok_or_else(|| {
                ClientError::Invalid(format!("{p}: no such file on the source server"))
            })?;
            Meta {
                size: task.size.or(m.size),
                mtime: task.mtime.or(m.mtime),
            }
        }
    };
    if task.size.is_none() {
        if let Some(s) = src_meta.size {
            shared.progress.bytes_total.fetch_add(s, Ordering::Relaxed);
        }
    }
    if opts.sync != SyncMode::None {
        let dst_meta = match &task.dst {
            Loc::Local(p) => local_meta(p),
            Loc::Remote(p) => {
                let c = session(&mut w.dst, job.dst_server.as_ref(), opts).await?;
                remote_meta(c, p, opts.sync == SyncMode::Mtime).await?
            }
        };
        match plan::sync_verdict(opts.sync, src_meta, dst_meta) {
            SyncVerdict::Copy => {}
            SyncVerdict::Skip => return Ok(Done::Skipped(format!("--sync {}", opts.sync))),
            SyncVerdict::CompareChecksums => {
                if let Some(h) = same_checksum(w, shared, task).await? {
                    return Ok(Done::Skipped(format!("--sync checksum ({h})")));
                }
            }
        }
    }
    let mut notes = Vec::new();
    let mut o = opts.transfer.clone();
    o.auto_streams = None;
    super::auto::for_file(&mut o, src_meta.size, &shared.verdict);
    let summary = match (&task.src, &task.dst) {
        (Loc::Remote(remote), Loc::Local(local)) => {
            let server = job.src_server.clone();
            let mut slot = w.src.take();
            let c = session(&mut slot, server.as_ref(), opts).await;
            let c = match c {
                Ok(c) => c,
                Err(e) => return Err(e),
            };
            let cap = streams_cap(w, c, server.as_ref().expect("session checked it"), opts).await;
            per_file(&mut o, src_meta.size, cap, w.protected);
            if let Some(parent) = local.parent() {
                std::fs::create_dir_all(parent).map_err(|e| ClientError::local(parent, e))?;
            }
            remove_stale_parts(local, &mut notes);
            let r = c.download(remote, local, &o, progress).await;
            w.src = slot;
            let s = r?;
            if let Some(t) = src_meta.mtime {
                if let Err(e) = set_local_mtime(local, t) {
                    notes.push(format!("modification time not kept: {e}"));
                }
            }
            s
        }
        (Loc::Local(local), Loc::Remote(remote)) => {
            let server = job.dst_server.clone();
            let mut slot = w.dst.take();
            let c = session(&mut slot, server.as_ref(), opts).await?;
            let cap = streams_cap(w, c, server.as_ref().expect("session checked it"), opts).await;
            per_file(&mut o, src_meta.size, cap, w.protected);
            let r = c.upload(local, remote, &o, progress).await;
            let r = match r {
                Ok(s) => {
                    keep_remote_mtime(c, remote, src_meta.mtime, &mut notes).await;
                    Ok(s)
                }
                Err(e) => Err(e),
            };
            w.dst = slot;
            r?
        }
        (Loc::Remote(sp), Loc::Remote(dp)) => {
            let (ss, ds) = (job.src_server.clone(), job.dst_server.clone());
            let (mut s_slot, mut d_slot) = (w.src.take(), w.dst.take());
            let r = async {
                let s = session(&mut s_slot, ss.as_ref(), opts).await?;
                let cap = streams_cap(w, s, ss.as_ref().expect("session checked it"), opts).await;
                per_file(&mut o, src_meta.size, cap, false);
                let d = session(&mut d_slot, ds.as_ref(), opts).await?;
                let r = crate::client::third_party_copy(
                    s,
                    sp,
                    d,
                    dp,
                    &o,
                    progress,
                    std::future::pending(),
                )
                .await?;
                keep_remote_mtime(d, dp, src_meta.mtime, &mut notes).await;
                Ok::<_, ClientError>(r)
            }
            .await;
            (w.src, w.dst) = (s_slot, d_slot);
            r?
        }
        (Loc::Local(_), Loc::Local(_)) => {
            return Err(ClientError::Invalid(
                "both ends are local; one must be on a server".into(),
            ))
        }
    };
    super::auto::learn(&shared.verdict, task, summary.transport_choice.as_ref());
    Ok(Done::Copied(Box::new(summary), notes))
}

/// Sets this file's stream count and mode from its size and the worker's cap (see
/// [`plan::streams_for_size`]): small files in stream mode on one connection, with kernel buffers.
fn per_file(o: &mut super::super::ClientOptions, size: Option<u64>, cap: u32, protected: bool) {
    if protected {
        o.streams = 1;
        o.mode_e = false;
        o.blast = None;
        return;
    }
    o.streams = plan::streams_for_size(size, cap);
    if size.is_some_and(|s| s < plan::SMALL_FILE) {
        o.mode_e = false;
        // A file this small is over before DRS has a round trip to measure; setting it up cost 3.7 ms a
        // file (300 × 64 KiB on loopback: 3.1 s with DRS, 2.0 s without).
        if o.buffer == drsftp_tune::BufferPolicy::Drs {
            o.buffer = drsftp_tune::BufferPolicy::Kernel;
        }
    }
}

/// Whether both ends hold the same bytes by the best checksum the two servers (or the one server) share:
/// `Some("ALG:hex")` if so.
async fn same_checksum(
    w: &mut Worker,
    shared: &Shared,
    task: &FileTask,
) -> Result<Option<String>, ClientError> {
    let (opts, job) = (&shared.opts, &shared.job);
    let mut sums = Vec::new();
    let mut alg = None;
    // The server side(s) pick the algorithm; a local end computes the same one.
    for (loc, which) in [(&task.src, true), (&task.dst, false)] {
        if let Loc::Remote(p) = loc {
            let (slot, server) = if which {
                (&mut w.src, job.src_server.as_ref())
            } else {
                (&mut w.dst, job.dst_server.as_ref())
            };
            let c = session(slot, server, opts).await?;
            let a = match alg {
                Some(a) => a,
                None => match c.verify_algorithm() {
                    Some(a) => a,
                    None => return Ok(None),
                },
            };
            alg = Some(a);
            match c.checksum(a.name(), p, 0, None).await {
                Ok(h) => sums.push(h.to_ascii_lowercase()),
                Err(e) if e.reply_code().is_some() => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }
    let Some(alg) = alg else {
        return Ok(None);
    };
    for loc in [&task.src, &task.dst] {
        if let Loc::Local(p) = loc {
            sums.push(local_checksum(p, alg).await?);
        }
    }
    Ok((sums.len() == 2 && sums[0] == sums[1]).then(|| format!("{}:{}", alg.name(), sums[0])))
}

/// `MFMT` the uploaded file to the source's time if the server lists MFMT (Globus and drsftp serve do);
/// a refusal is a note.
async fn keep_remote_mtime(
    c: &mut Client,
    path: &str,
    mtime: Option<i64>,
    notes: &mut Vec<String>,
) {
    let Some(t) = mtime else {
        return;
    };
    if !c.features().has("MFMT") {
        return;
    }
    match c
        .command(&format!("MFMT {} {path}", plan::format_modify(t)))
        .await
    {
        Ok(r) if r.starts_with('2') => {}
        Ok(r) => notes.push(format!("modification time not kept: {r}")),
        Err(e) => notes.push(format!("modification time not kept: {e}")),
    }
}

/// Sets a local file's modification time to Unix second `t`.
pub(super) fn set_local_mtime(p: &Path, t: i64) -> std::io::Result<()> {
    let t = u64::try_from(t).map_err(|_| std::io::Error::other("time before 1970"))?;
    let f = std::fs::File::options().write(true).open(p)?;
    f.set_modified(UNIX_EPOCH + Duration::from_secs(t))
}

/// Removes part files of `dest` left by a killed run (`.NAME.drsftp-part.PID` whose process is gone), so a
/// restarted job does not leave them behind.
pub(super) fn remove_stale_parts(dest: &Path, notes: &mut Vec<String>) {
    let (Some(dir), Some(name)) = (dest.parent(), dest.file_name()) else {
        return;
    };
    let prefix = format!(".{}.drsftp-part.", name.to_string_lossy());
    let Ok(rd) = std::fs::read_dir(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    }) else {
        return;
    };
    for e in rd.flatten() {
        let n = e.file_name();
        let Some(pid) = n.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid != std::process::id()
            && !Path::new(&format!("/proc/{pid}")).exists()
            && std::fs::remove_file(e.path()).is_ok()
        {
            notes.push(format!("removed a stale part file of process {pid}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_retried() {
        let io = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let connect = ClientError::Connect {
            addr: "127.0.0.1:1".into(),
            error: io(),
        };
        assert!(transient(&connect));
        assert!(transient(&ClientError::Stalled(Duration::from_secs(60))));
        assert!(transient(&ClientError::Control(io())));
        assert!(transient(&ClientError::SizeMismatch {
            what: "f".into(),
            expected: 2,
            got: 1
        }));
        // A local file that cannot be written, or a request that makes no sense, fails the same way again.
        assert!(!transient(&ClientError::local("/x", io())));
        assert!(!transient(&ClientError::Invalid("no".into())));
    }

    #[test]
    fn small_files_get_one_stream_and_kernel_buffers() {
        let mut o = crate::client::ClientOptions {
            streams: 8,
            mode_e: true,
            buffer: drsftp_tune::BufferPolicy::Drs,
            ..Default::default()
        };
        per_file(&mut o, Some(64 << 10), 8, false);
        assert_eq!((o.streams, o.mode_e), (1, false));
        assert_eq!(o.buffer, drsftp_tune::BufferPolicy::Kernel);
        let mut o = crate::client::ClientOptions {
            buffer: drsftp_tune::BufferPolicy::Drs,
            ..Default::default()
        };
        per_file(&mut o, Some(100 << 20), 8, false);
        assert_eq!(o.streams, 8);
        assert_eq!(o.buffer, drsftp_tune::BufferPolicy::Drs);
        per_file(&mut o, Some(100 << 20), 8, true);
        assert_eq!((o.streams, o.mode_e), (1, false));
    }
}
