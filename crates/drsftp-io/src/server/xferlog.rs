//! The transfer log (`drsftp serve --transfer-log FILE`): one JSON object per line per finished transfer, written
//! by a thread of its own so a slow disk never stalls a session. Sessions hand records over a bounded channel and
//! never wait: when the writer falls 4096 records behind, records are dropped and counted, and the next line
//! written says how many. [`TransferLog::reopen`] makes the writer close and reopen the file (after logrotate moved
//! it away; `drsftp serve` calls it on SIGHUP).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use serde::Serialize;

/// Records the writer may fall behind by before new ones are dropped.
const QUEUE: usize = 4096;

/// One line of the transfer log.
#[derive(Debug, Clone, Serialize)]
pub struct TransferRecord {
    /// When the transfer ended, RFC 3339 UTC with milliseconds.
    pub time: String,
    /// The logged-in user (`anonymous` for anonymous sessions).
    pub user: String,
    /// The client's control-connection address.
    pub peer: String,
    /// The command the client sent: `RETR`, `ERET`, `STOR`, `APPE` or `ESTO`.
    pub command: &'static str,
    /// `REST n` before the command: the restart offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_offset: Option<u64>,
    /// `REST a-b,c-d` before the command (MODE E): the ranges the client already held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_ranges: Option<String>,
    /// The path in the session's tree.
    pub path: String,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Wall time from the start of the data transfer to its end.
    pub seconds: f64,
    /// Data connections used.
    pub streams: u64,
    /// `tcp-stream`, `mode-e` or `udp` (blast).
    pub transport: &'static str,
    /// The buffer policy in force: `drs`, `kernel`, `fixed N` (server setting or the client's SBUF), `blast`.
    pub buffer: String,
    /// `crc32c:xxxxxxxx` when the server computed the whole file's checksum while sending it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    /// The reply code that ended the transfer (226 on success).
    pub code: u16,
    /// `ok`, `failed` or `aborted`.
    pub result: &'static str,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

enum Msg {
    Record(Box<TransferRecord>),
    Reopen,
}

/// A handle on the writer thread; clones share it. The thread ends when the last handle is dropped.
#[derive(Debug, Clone)]
pub struct TransferLog {
    tx: SyncSender<Msg>,
    dropped: Arc<AtomicU64>,
    path: Arc<PathBuf>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Msg::Record(_) => "Record",
            Msg::Reopen => "Reopen",
        })
    }
}

fn open(path: &Path) -> std::io::Result<File> {
    // 0640: transfer logs name users and paths, which other local users need not read.
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .open(path)
}

impl TransferLog {
    /// Opens (creating, appending) `path` now, so a bad path fails at start-up, and starts the writer.
    pub fn open(path: &Path) -> std::io::Result<TransferLog> {
        let file = open(path)?;
        let (tx, rx) = sync_channel(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let path = Arc::new(path.to_path_buf());
        let (p, d) = (path.clone(), dropped.clone());
        std::thread::Builder::new()
            .name("transfer-log".into())
            .spawn(move || writer(rx, file, &p, &d))?;
        Ok(TransferLog { tx, dropped, path })
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues `record` without waiting (dropped and counted if the writer is 4096 records behind).
    pub fn write(&self, record: TransferRecord) {
        if let Err(TrySendError::Full(_)) = self.tx.try_send(Msg::Record(Box::new(record))) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Makes the writer reopen the file by its path (log rotation). Waits only if the queue is full.
    pub fn reopen(&self) {
        let _ = self.tx.send(Msg::Reopen);
    }
}

fn writer(rx: Receiver<Msg>, mut file: File, path: &Path, dropped: &AtomicU64) {
    let mut line = Vec::with_capacity(512);
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Reopen => match open(path) {
                Ok(f) => file = f,
                // Keep writing to the old file rather than losing records.
                Err(e) => tracing::warn!("transfer log {}: reopen: {e}", path.display()),
            },
            Msg::Record(r) => {
                line.clear();
                let lost = dropped.swap(0, Ordering::Relaxed);
                if lost > 0 {
                    let note = serde_json::json!({
                        "time": now_rfc3339(),
                        "result": "dropped",
                        "records": lost,
                    });
                    let _ = serde_json::to_writer(&mut line, &note);
                    line.push(b'\n');
                }
                if serde_json::to_writer(&mut line, &r).is_err() {
                    continue;
                }
                line.push(b'\n');
                // One write per line, append mode: concurrent readers (tail -f) never see half a line.
                if let Err(e) = file.write_all(&line) {
                    tracing::warn!("transfer log {}: {e}", path.display());
                }
            }
        }
    }
}

/// The current time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn now_rfc3339() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    rfc3339(d.as_secs(), d.subsec_millis())
}

/// `secs` since the epoch as RFC 3339 UTC.
fn rfc3339(secs: u64, millis: u32) -> String {
    let c = drsftp_proto::civil::civil(i64::try_from(secs).unwrap_or(i64::MAX));
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        c.year, c.month, c.day, c.hour, c.min, c.sec
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(rfc3339(1_795_647_599, 999), "2026-11-25T22:59:59.999Z");
    }

    fn record(path: &str) -> TransferRecord {
        TransferRecord {
            time: now_rfc3339(),
            user: "alice".into(),
            peer: "127.0.0.1:5000".into(),
            command: "RETR",
            restart_offset: None,
            restart_ranges: None,
            path: path.into(),
            bytes: 10,
            seconds: 0.5,
            streams: 4,
            transport: "mode-e",
            buffer: "drs".into(),
            checksum: None,
            code: 226,
            result: "ok",
            message: None,
        }
    }

    fn wait_lines(p: &Path, n: usize) -> Vec<serde_json::Value> {
        for _ in 0..200 {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            let lines: Vec<_> = text
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            if lines.len() >= n {
                return lines;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("{} has fewer than {n} lines", p.display());
    }

    #[test]
    fn lines_are_json_and_reopen_follows_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let log = TransferLog::open(&p).unwrap();
        log.write(record("/a"));
        let l = wait_lines(&p, 1);
        assert_eq!(l[0]["path"], "/a");
        assert_eq!(l[0]["streams"], 4);
        assert!(l[0].get("checksum").is_none());
        // logrotate: move the file away, then SIGHUP → reopen: new lines go to a new file at the old path.
        let rotated = dir.path().join("t.jsonl.1");
        std::fs::rename(&p, &rotated).unwrap();
        log.reopen();
        log.write(record("/b"));
        let l = wait_lines(&p, 1);
        assert_eq!(l[0]["path"], "/b");
        assert_eq!(wait_lines(&rotated, 1).len(), 1);
    }
}
