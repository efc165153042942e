//! Resumable blast downloads (docs/blast.md "Resume"): the stable part file `.<name>.drsftp-part` and its
//! checkpoint `.<name>.drsftp-part.blast` next to the destination, what the checkpoint holds and how it is
//! written, and the decision at start whether to resume.
//!
//! * Checkpoint: the identity of the source (server address and path, size, MDTM time if the server gives one)
//!   plus the packet size and the receiver's packet map, in a small versioned format with a CRC32C over the map.
//!   A writer thread takes each map the blast receiver hands out (`crate::blast::RecvResume`; every
//!   [`EVERY`] and when it stops), syncs the part file first, then writes the checkpoint to a temporary file,
//!   syncs it and renames it into place: a set bit always means bytes that are on disk.
//! * Start: a checkpoint with the same identity, a good CRC and a part file long enough is resumed from: its
//!   byte ranges go to the server with `REST` and the receiver starts from them. Anything else (another source
//!   size or time, corrupt, `--no-resume`) discards both with a note and starts afresh. The packet size may
//!   differ (another MTU): both ends count only packets wholly inside the held ranges.
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

use drsftp_blast::{Bitmap, TransferParams};
use drsftp_proto::client::{Op, Outcome};
use drsftp_proto::ranges::RangeSet;
use drsftp_storage::FileHandle;

use super::control::Control;
use super::local::Destination;
use super::ClientError;
use crate::blast::RecvResume;

/// Checkpoint format line (the version is its last word).
pub(crate) const FORMAT: &str = "drsftp-blast-checkpoint 1";
/// How often the receiver hands out its map while data arrives.
pub(crate) const EVERY: Duration = Duration::from_secs(1);
/// Longest a dropped download waits for its last checkpoint to be written.
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
        let split = b
            .windows(2)
            .position(|w| w == b"\n\n")
            .ok_or("no header end")?;
        let head = std::str::from_utf8(&b[..split]).map_err(|_| "header is not UTF-8")?;
        let body = &b[split + 2..];
        let mut lines = head.lines();
        if lines.next() != Some(FORMAT) {
            return Err("unknown format or version".into());
        }
        let mut field = |key: &str| -> Result<String, String> {
            lines
                .next()
                .and_then(|l| l.strip_prefix(key))
                .and_then(|l| l.strip_prefix(' '))
                .map(str::to_string)
                .ok_or_else(|| format!("missing {key}"))
        };
        let num = |v: String, key: &str| v.parse::<u64>().map_err(|_| format!("bad {key}"));
        let source = field("source")?;
        let size = num(field("size")?, "size")?;
        let mtime = Some(field("mtime")?).filter(|m| m != "-");
        let payload = num(field("packet")?, "packet")? as usize;
        let packets = num(field("packets")?, "packets")?;
        let crc = u32::from_str_radix(&field("crc32c")?, 16).map_err(|_| "bad crc32c")?;
        let params = TransferParams::new(0, size, payload).map_err(|e| e.to_string())?;
        if params.total_packets() != packets {
            return Err("packet count does not match size and packet size".into());
        }
        if crc32c::crc32c(body) != crc {
            return Err("map CRC mismatch".into());
        }
        let map = Bitmap::from_bytes(packets, body).map_err(|e| e.to_string())?;
        Ok(Checkpoint {
            id: Identity {
                source,
                size,
                mtime,
            },
            payload,
            map,
        })
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

/// The stable part-file name for `dest`: `.<name>.drsftp-part` (the checkpoint adds `.blast`).
pub(crate) fn part_path(dest: &Path) -> PathBuf {
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "download".into());
    dest.with_file_name(format!(".{name}.drsftp-part"))
}

/// The checkpoint next to part file `part`.
pub(crate) fn checkpoint_path(part: &Path) -> PathBuf {
    let mut s = part.as_os_str().to_owned();
    s.push(".blast");
    PathBuf::from(s)
}

/// Writes `bytes` to `path` atomically: a temporary file, synced, renamed over it.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
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
    Identity {
        source: format!(
            "ftp://{}/{}",
            control.peer(),
            remote.trim_start_matches('/')
        ),
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
    complete: AtomicBool,
    /// The writer thread's end (disconnects when it is done) and the receiver's stop flag.
    writer: Mutex<Option<(Receiver<()>, Arc<AtomicBool>)>>,
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
            Ok(b) => Some(Checkpoint::decode(&b)),
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
            Some(Ok(c)) if !use_existing => {
                let _ = c;
                notes.push("--no-resume: discarded the partial download; starting afresh".into());
                RangeSet::new()
            }
            Some(Ok(c)) if c.id != id => {
                notes.push(format!(
                    "the source changed since the partial download (size {} → {}, time {} → {}); starting afresh",
                    c.id.size,
                    id.size,
                    c.id.mtime.as_deref().unwrap_or("?"),
                    id.mtime.as_deref().unwrap_or("?")
                ));
                RangeSet::new()
            }
            Some(Ok(c)) => {
                let held = c.held();
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
            complete: AtomicBool::new(false),
            writer: Mutex::new(None),
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

    /// Where the blast receiver for `params` starts, with the checkpoint writer thread started on `file`.
    pub(crate) fn start(&self, params: &TransferParams, file: Arc<dyn FileHandle>) -> RecvResume {
        let from = (!self.held.is_empty()).then(|| {
            drsftp_blast::resume::packets_within(params, self.held.ranges().iter().cloned())
        });
        let (tx, rx) = mpsc::sync_channel::<Bitmap>(1);
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let stop = Arc::new(AtomicBool::new(false));
        let (ck, id, payload) = (self.ck.clone(), self.id.clone(), params.payload_size);
        let spawned = std::thread::Builder::new()
            .name("blast-checkpoint".into())
            .spawn(move || {
                let _done = done_tx;
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
            Ok(_) => {
                if let Ok(mut w) = self.writer.lock() {
                    *w = Some((done_rx, stop.clone()));
                }
                RecvResume {
                    from,
                    checkpoints: Some(tx),
                    every: EVERY,
                    stop: Some(stop),
                }
            }
            Err(e) => {
                tracing::warn!("no checkpoint writer: {e}");
                RecvResume {
                    from,
                    ..RecvResume::default()
                }
            }
        }
    }

    /// Every byte has arrived: the checkpoint is not needed any more, and whatever happens next (a checksum
    /// mismatch, a failed rename) must not leave a resumable part file behind.
    pub(crate) fn complete(&self) {
        self.complete.store(true, Ordering::Relaxed);
    }
}

impl Drop for Resumable {
    fn drop(&mut self) {
        if let Some((done, stop)) = self.writer.lock().ok().and_then(|mut w| w.take()) {
            // Stop the receiver (its last map goes to the writer), then wait for the writer to save it.
            stop.store(true, Ordering::Relaxed);
            let _ = done.recv_timeout(FINAL_WAIT);
        }
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
