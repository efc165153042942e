//! Resumable downloads (docs/blast.md "Resume", docs/resume.md): the stable part file `.<name>.drsftp-part` and
//! its checkpoint `.<name>.drsftp-part.ck` next to the destination, what the checkpoint holds and how it is
//! written, and the decision at start whether to resume. Blast and TCP downloads share both files.
//!
//! * Checkpoint: the identity of the source (server address and path, size, MDTM time if the server gives one)
//!   plus what is held, in a small versioned format with a CRC32C over the body: a blast download saves its
//!   packet size and packet map ([`Checkpoint`]), a TCP download the byte ranges written ([`RangeCheckpoint`]).
//!   Either is read back as byte ranges, so a download interrupted on one transport resumes on the other. A
//!   writer thread saves it (blast: each map the receiver hands out, `crate::blast::RecvResume`; TCP: the
//!   engine's written ranges, `Progress::ranges`, polled) every [`EVERY`], after [`STEP`] of new data, and when
//!   the download stops: it syncs the part file first, then writes the checkpoint to a temporary file, syncs it
//!   and renames it into place, so a held range always means bytes that are on disk.
//! * Start: a checkpoint with the same identity, a good CRC and a part file long enough is resumed from: its
//!   byte ranges go to the server with `REST` (blast and MODE E: the ranges; stream mode: the held prefix as an
//!   offset) and the receiver starts from them. Anything else (another source size or time, corrupt,
//!   `--no-resume`) discards both with a note and starts afresh. Resumed bytes are never trusted on their own:
//!   the whole file is checked with CKSM at the end (download.rs resumes only when the server offers one).
//! * End: once the data is complete the checkpoint is no longer needed; dropping [`Resumable`] then removes it
//!   (and the part file, unless it was renamed into place). A download that stops before keeps both when a
//!   checkpoint exists. The part file is locked (`flock`) while in use; if another drsftp holds it, the download
//!   uses an ordinary per-process part file and is not resumable.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::time::Instant;

use drsftp_blast::{Bitmap, TransferParams};
use drsftp_proto::client::{Op, Outcome};
use drsftp_proto::ranges::RangeSet;
use drsftp_storage::FileHandle;

use super::control::Control;
use super::local::Destination;
use super::ClientError;
use crate::blast::RecvResume;
use crate::data::Progress;

/// Checkpoint format line (the version is its last word).
pub(crate) const FORMAT: &str = "drsftp-blast-checkpoint 1";
/// The byte-range checkpoint's format line.
pub(crate) const RANGES_FORMAT: &str = "drsftp-ranges-checkpoint 1";
/// How often the receiver hands out its map (blast) or the writer polls the ranges (TCP) while data arrives.
pub(crate) const EVERY: Duration = Duration::from_secs(1);
/// TCP: a checkpoint is also saved once this share of the file (or [`MIN_STEP`], if more) arrived since the
/// last one, so a SIGKILL costs at most about that much again at any rate.
pub(crate) const STEP: u64 = 200; // 1/200 = 0.5 %
const MIN_STEP: u64 = 64 << 10;
/// How often the TCP writer looks at the byte count.
const POLL: Duration = Duration::from_millis(20);
/// Longest a dropped download (or upload: upload_resume.rs) waits for its last checkpoint to be written.
const FINAL_WAIT: Duration = Duration::from_secs(5);

/// What is being copied: a checkpoint only applies to the same source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    /// `ftp://<server address>/<path>`.
    pub(crate) source: String,
    pub(crate) size: u64,
    /// The MDTM reply (`YYYYMMDDHHMMSS[.sss]`), if the server answers it.
    pub(crate) mtime: Option<String>,
}

/// A decoded checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Checkpoint {
    pub(crate) id: Identity,
    pub(crate) payload: usize,
    pub(crate) map: Bitmap,
}

fn clean(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

impl Checkpoint {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let bytes = self.map.to_bytes();
        let mut out = format!(
            "{FORMAT}\nsource {}\nsize {}\nmtime {}\npacket {}\npackets {}\ncrc32c {:08x}\n\n",
            clean(&self.id.source),
            self.id.size,
            self.id.mtime.as_deref().map_or("-".to_string(), clean),
            self.payload,
            self.map.len(),
            crc32c::crc32c(&bytes),
        )
        .into_bytes();
        out.extend_from_slice(&bytes);
        out
    }

    pub(crate) fn decode(b: &[u8]) -> Result<Checkpoint, String> {
        let (mut h, body) = Header::split(b, FORMAT)?;
        let id = h.identity()?;
        let payload = h.num("packet")? as usize;
        let packets = h.num("packets")?;
        let crc = h.crc()?;
        let params = TransferParams::new(0, id.size, payload).map_err(|e| e.to_string())?;
        if params.total_packets() != packets {
            return Err("packet count does not match size and packet size".into());
        }
        if crc32c::crc32c(body) != crc {
            return Err("map CRC mismatch".into());
        }
        let map = Bitmap::from_bytes(packets, body).map_err(|e| e.to_string())?;
        Ok(Checkpoint { id, payload, map })
    }

    /// The bytes its map covers.
    pub(crate) fn held(&self) -> RangeSet {
        match TransferParams::new(0, self.id.size, self.payload) {
            Ok(p) => drsftp_blast::resume::byte_ranges(&p, &self.map)
                .into_iter()
                .collect(),
            Err(_) => RangeSet::new(),
        }
    }
}

/// A TCP download's checkpoint: the byte ranges of the part file that are on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RangeCheckpoint {
    pub(crate) id: Identity,
    pub(crate) held: RangeSet,
}

impl RangeCheckpoint {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let body = self.held.to_string();
        format!(
            "{RANGES_FORMAT}\nsource {}\nsize {}\nmtime {}\nranges {}\ncrc32c {:08x}\n\n{body}",
            clean(&self.id.source),
            self.id.size,
            self.id.mtime.as_deref().map_or("-".to_string(), clean),
            self.held.len(),
            crc32c::crc32c(body.as_bytes()),
        )
        .into_bytes()
    }

    pub(crate) fn decode(b: &[u8]) -> Result<RangeCheckpoint, String> {
        let (mut h, body) = Header::split(b, RANGES_FORMAT)?;
        let id = h.identity()?;
        let count = h.num("ranges")?;
        let crc = h.crc()?;
        let body = std::str::from_utf8(body).map_err(|_| "ranges are not UTF-8")?;
        if crc32c::crc32c(body.as_bytes()) != crc {
            return Err("ranges CRC mismatch".into());
        }
        let held = if body.is_empty() {
            RangeSet::new()
        } else {
            RangeSet::parse(body).ok_or("bad ranges")?
        };
        if held.len() as u64 != count {
            return Err("range count does not match".into());
        }
        if held.ranges().last().is_some_and(|r| r.end > id.size) {
            return Err("ranges past the end of the file".into());
        }
        Ok(RangeCheckpoint { id, held })
    }
}

/// The text header both checkpoint formats share: the format line, then `key value` lines in a fixed order
/// (the source's identity first), then a blank line before the body.
struct Header<'a> {
    lines: std::str::Lines<'a>,
}

impl<'a> Header<'a> {
    /// The header of `b`, checked to be `format`, and the body after it.
    fn split(b: &'a [u8], format: &str) -> Result<(Header<'a>, &'a [u8]), String> {
        let split = b
            .windows(2)
            .position(|w| w == b"\n\n")
            .ok_or("no header end")?;
        let head = std::str::from_utf8(&b[..split]).map_err(|_| "header is not UTF-8")?;
        let mut lines = head.lines();
        if lines.next() != Some(format) {
            return Err("unknown format or version".into());
        }
        Ok((Header { lines }, &b[split + 2..]))
    }

    /// The value of the next line, which must be `key`'s.
    fn field(&mut self, key: &str) -> Result<String, String> {
        self.lines
            .next()
            .and_then(|l| l.strip_prefix(key))
            .and_then(|l| l.strip_prefix(' '))
            .map(str::to_string)
            .ok_or_else(|| format!("missing {key}"))
    }

    fn num(&mut self, key: &str) -> Result<u64, String> {
        self.field(key)?
            .parse::<u64>()
            .map_err(|_| format!("bad {key}"))
    }

    /// `source`, `size` and `mtime` (`-` when the server gave none).
    fn identity(&mut self) -> Result<Identity, String> {
        Ok(Identity {
            source: self.field("source")?,
            size: self.num("size")?,
            mtime: Some(self.field("mtime")?).filter(|m| m != "-"),
        })
    }

    fn crc(&mut self) -> Result<u32, String> {
        u32::from_str_radix(&self.field("crc32c")?, 16).map_err(|_| "bad crc32c".into())
    }
}

/// Either checkpoint format, as the identity and the bytes it holds.
pub(crate) fn decode_any(b: &[u8]) -> Result<(Identity, RangeSet), String> {
    if b.starts_with(RANGES_FORMAT.as_bytes()) {
        RangeCheckpoint::decode(b).map(|c| (c.id, c.held))
    } else {
        Checkpoint::decode(b).map(|c| {
            let held = c.held();
            (c.id, held)
        })
    }
}

/// The stable part-file name for `dest`: `.<name>.drsftp-part` (the checkpoint adds `.ck`).
pub(crate) fn part_path(dest: &Path) -> PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "download".into());
    dest.with_file_name(format!(".{name}.drsftp-part"))
}

/// Whether a checkpoint of a download to `dest` is on disk (whatever it holds): such a download resumes, or
/// discards it, whatever its size, instead of leaving it behind.
pub(crate) fn has_checkpoint(dest: &Path) -> bool {
    checkpoint_path(&part_path(dest)).exists()
}

/// The checkpoint next to part file `part`.
pub(crate) fn checkpoint_path(part: &Path) -> PathBuf {
    let mut s = part.as_os_str().to_owned();
    s.push(".ck");
    PathBuf::from(s)
}

/// Writes `bytes` to `path` atomically: a temporary file, synced, renamed over it.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_replace(path, bytes, true)
}

/// Writes `bytes` to a temporary file (synced if `durable`) and renames it over `path`: a reader (or a rerun
/// after SIGKILL) sees the old or the new checkpoint, never half of one.
pub(crate) fn write_replace(path: &Path, bytes: &[u8], durable: bool) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    if durable {
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}

fn remove(p: &Path) {
    if let Err(e) = std::fs::remove_file(p) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!("cannot remove {}: {e}", p.display());
        }
    }
}

/// The identity of `remote` on the server behind `control`; the MDTM time if the server answers it.
pub(crate) async fn identity(control: &mut Control, remote: &str, size: u64) -> Identity {
    let mtime = match control.run(Op::Command(format!("MDTM {remote}"))).await {
        Ok(Outcome::Reply(r)) if r.code == 213 => Some(r.text().trim().to_string()),
        _ => None,
    };
    identity_of(control.peer(), remote, size, mtime)
}

/// The identity of `remote` on the server at `peer` with the size and modification time a listing gave
/// (`mtime` as MDTM shows it, `YYYYMMDDHHMMSS`): a batch's files need no MDTM round trip of their own.
pub(crate) fn identity_of(
    peer: std::net::SocketAddr,
    remote: &str,
    size: u64,
    mtime: Option<String>,
) -> Identity {
    Identity {
        source: format!("ftp://{peer}/{}", remote.trim_start_matches('/')),
        size,
        mtime,
    }
}

/// One resumable download's part file and checkpoint (module docs).
#[derive(Debug)]
pub(crate) struct Resumable {
    dest: PathBuf,
    part: PathBuf,
    ck: PathBuf,
    id: Identity,
    held: RangeSet,
    notes: Vec<String>,
    _lock: File,
    /// Shared with the TCP checkpoint writer, which has nothing left to save once it is set.
    complete: Arc<AtomicBool>,
    writer: CheckpointWriter,
}

/// A thread saving a checkpoint while data moves, and how to end it: the stop flag it (or the blast receiver
/// feeding it) watches, and a channel that disconnects when the thread has made its last save.
#[derive(Debug, Default)]
pub(crate) struct CheckpointWriter(Mutex<Option<Writing>>);

/// A running writer: disconnects `done` after its last save, watches `stop`, parks as `thread`.
#[derive(Debug)]
struct Writing {
    done: Receiver<()>,
    stop: Arc<AtomicBool>,
    thread: std::thread::Thread,
}

impl CheckpointWriter {
    /// Runs `body`, given the stop flag, on a thread named `name`. Returns the flag, or `None` (warned as
    /// "no `what`") if no thread could be started: the transfer then goes on without saving.
    pub(crate) fn spawn(
        &self,
        name: &str,
        what: &str,
        body: impl FnOnce(&AtomicBool) + Send + 'static,
    ) -> Option<Arc<AtomicBool>> {
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let _done = done_tx;
                body(&halt);
            });
        match spawned {
            Ok(h) => {
                if let Ok(mut w) = self.0.lock() {
                    *w = Some(Writing {
                        done: done_rx,
                        stop: stop.clone(),
                        thread: h.thread().clone(),
                    });
                }
                Some(stop)
            }
            Err(e) => {
                tracing::warn!("no {what}: {e}");
                None
            }
        }
    }

    /// Stops the writer, if one runs, after its last save (waiting at most [`FINAL_WAIT`]).
    pub(crate) fn stop(&self) {
        if let Some(Writing { done, stop, thread }) = self.0.lock().ok().and_then(|mut w| w.take())
        {
            // Stop the receiver (its last map goes to the writer), then wait for the writer to save it. A TCP
            // writer parks between polls: woken, it does not make a finished file wait out its poll.
            stop.store(true, Ordering::Relaxed);
            thread.unpark();
            let _ = done.recv_timeout(FINAL_WAIT);
        }
    }
}

impl Resumable {
    /// Prepares the part file for `dest` and decides whether to resume (`use_existing`: `false` for
    /// `--no-resume`). `None` when another process holds the part file.
    pub(crate) fn open(
        dest: &Path,
        id: Identity,
        use_existing: bool,
    ) -> Result<Option<Resumable>, ClientError> {
        if dest.is_dir() {
            return Err(ClientError::local(
                dest,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "is a directory"),
            ));
        }
        let part = part_path(dest);
        let ck = checkpoint_path(&part);
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&part)
            .map_err(|e| ClientError::local(&part, e))?;
        if lock.try_lock().is_err() {
            return Ok(None);
        }
        let mut notes = Vec::new();
        let part_len = lock.metadata().map(|m| m.len()).unwrap_or(0);
        let found = match std::fs::read(&ck) {
            Ok(b) => Some(decode_any(&b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => Some(Err(e.to_string())),
        };
        let held = match found {
            None => RangeSet::new(),
            Some(Err(e)) => {
                notes.push(format!(
                    "discarded a corrupt resume checkpoint ({e}); starting afresh"
                ));
                RangeSet::new()
            }
            Some(Ok(_)) if !use_existing => {
                notes.push("--no-resume: discarded the partial download; starting afresh".into());
                RangeSet::new()
            }
            Some(Ok((was, _))) if was != id => {
                notes.push(format!(
                    "the source changed since the partial download (size {} → {}, time {} → {}); starting afresh",
                    was.size,
                    id.size,
                    was.mtime.as_deref().unwrap_or("?"),
                    id.mtime.as_deref().unwrap_or("?")
                ));
                RangeSet::new()
            }
            Some(Ok((_, held))) => {
                let end = held.ranges().last().map_or(0, |r| r.end);
                if part_len < end {
                    notes.push(format!(
                        "the part file is shorter ({part_len} bytes) than its checkpoint says; starting afresh"
                    ));
                    RangeSet::new()
                } else {
                    held
                }
            }
        };
        if held.is_empty() {
            lock.set_len(0).map_err(|e| ClientError::local(&part, e))?;
            remove(&ck);
        } else {
            if part_len > id.size {
                // Bytes past the end were never held; the size check at the end must see the source's size.
                lock.set_len(id.size)
                    .map_err(|e| ClientError::local(&part, e))?;
            }
            notes.push(format!(
                "resuming an interrupted download: {} of {} bytes already here",
                held.covered(),
                id.size
            ));
        }
        Ok(Some(Resumable {
            dest: dest.to_path_buf(),
            part,
            ck,
            id,
            held,
            notes,
            _lock: lock,
            complete: Arc::new(AtomicBool::new(false)),
            writer: CheckpointWriter::default(),
        }))
    }

    /// The destination the data engine writes: the part file as it is, kept when dropped uncommitted (this
    /// object decides what stays).
    pub(crate) fn destination(&self) -> Result<Destination, ClientError> {
        Destination::resumable(&self.dest, &self.part)
    }

    /// The bytes held from the start (section offsets = file offsets: whole-file downloads only).
    pub(crate) fn held(&self) -> &RangeSet {
        &self.held
    }

    /// Notes for the summary (resumed, or why not).
    pub(crate) fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Where the blast receiver for `params` starts (the packets within `held`: [`held`](Self::held) plus what
    /// an earlier TCP part of the same download moved), with the checkpoint writer thread started on `file`. A
    /// TCP checkpoint writer still running is stopped first (its last save taken).
    pub(crate) fn start(
        &self,
        params: &TransferParams,
        file: Arc<dyn FileHandle>,
        held: &RangeSet,
    ) -> RecvResume {
        self.writer.stop();
        let from = (!held.is_empty())
            .then(|| drsftp_blast::resume::packets_within(params, held.ranges().iter().cloned()));
        let (tx, rx) = mpsc::sync_channel::<Bitmap>(1);
        let (ck, id, payload) = (self.ck.clone(), self.id.clone(), params.payload_size);
        let spawned = self
            .writer
            .spawn("blast-checkpoint", "checkpoint writer", move |_| {
                let mut warned = false;
                while let Ok(mut map) = rx.recv() {
                    while let Ok(newer) = rx.try_recv() {
                        map = newer;
                    }
                    // Data first: only bytes on disk may be marked held.
                    let r = file
                        .sync()
                        .map_err(|e| std::io::Error::other(e.to_string()))
                        .and_then(|_| {
                            let c = Checkpoint {
                                id: id.clone(),
                                payload,
                                map,
                            };
                            write_atomic(&ck, &c.encode())
                        });
                    if let Err(e) = r {
                        if !warned {
                            tracing::warn!(
                                "cannot save the resume checkpoint {}: {e}",
                                ck.display()
                            );
                            warned = true;
                        }
                    }
                }
            });
        match spawned {
            Some(stop) => RecvResume {
                from,
                checkpoints: Some(tx),
                every: EVERY,
                stop: Some(stop),
            },
            None => RecvResume {
                from,
                ..RecvResume::default()
            },
        }
    }

    /// Starts the checkpoint writer of a TCP download whose engine writes `file` and counts what it wrote in
    /// `progress` (file offsets): it saves [`held`](Self::held) plus those ranges every [`EVERY`] or after
    /// [`STEP`] of new data, and once more when the download is dropped. Only the once-a-second and final saves
    /// `fsync` (part file, then checkpoint): on a loaded disk an `fsync` per step would let the checkpoint fall
    /// far behind, and what SIGKILL leaves is in the page cache anyway. A machine crash can therefore leave a
    /// checkpoint claiming up to a second of bytes the disk lost; the whole-file CKSM at the end catches that (the
    /// download fails, both files go, the next run starts afresh).
    pub(crate) fn start_ranges(&self, file: Arc<dyn FileHandle>, progress: Arc<Progress>) {
        let (ck, id, base) = (self.ck.clone(), self.id.clone(), self.held.clone());
        let complete = self.complete.clone();
        let step = (id.size / STEP).max(MIN_STEP);
        // Counted here, not in the thread: bytes written before it runs must still be saved.
        let mut saved = progress.bytes();
        self.writer
            .spawn("tcp-checkpoint", "checkpoint writer", move |halt| {
                let mut warned = false;
                let mut synced = Instant::now();
                loop {
                    let stopping = halt.load(Ordering::Relaxed);
                    if complete.load(Ordering::Relaxed) {
                        // Every byte is here: the checkpoint is about to go; a last save (and fsync) is waste.
                        return;
                    }
                    let bytes = progress.bytes();
                    let durable = stopping || synced.elapsed() >= EVERY;
                    if bytes > saved && (durable || bytes >= saved + step) {
                        // Ranges first, then fsync: every range taken was written before the sync.
                        let mut held = base.clone();
                        held.extend(&progress.ranges());
                        let r = if durable { file.sync() } else { Ok(()) }
                            .map_err(|e| std::io::Error::other(e.to_string()))
                            .and_then(|_| {
                                let c = RangeCheckpoint {
                                    id: id.clone(),
                                    held,
                                };
                                write_replace(&ck, &c.encode(), durable)
                            });
                        match r {
                            Ok(()) => {
                                saved = bytes;
                                if durable {
                                    synced = Instant::now();
                                }
                            }
                            Err(e) if !warned => {
                                tracing::warn!(
                                    "cannot save the resume checkpoint {}: {e}",
                                    ck.display()
                                );
                                warned = true;
                            }
                            Err(_) => {}
                        }
                    }
                    if stopping {
                        return;
                    }
                    std::thread::park_timeout(POLL);
                }
            });
    }

    /// Every byte has arrived: the checkpoint is not needed any more, and whatever happens next (a checksum
    /// mismatch, a failed rename) must not leave a resumable part file behind.
    pub(crate) fn complete(&self) {
        self.complete.store(true, Ordering::Relaxed);
    }
}

impl Drop for Resumable {
    fn drop(&mut self) {
        self.writer.stop();
        if self.complete.load(Ordering::Relaxed) || !self.ck.exists() {
            remove(&self.part);
            remove(&self.ck);
        } else {
            tracing::info!(
                "kept {} and its checkpoint: run the same copy again to resume",
                self.part.display()
            );
        }
    }
}

#[cfg(test)]
#[path = "resume_tests.rs"]
mod tests;
