//! Pure planning for multi-file jobs (`drsftp copy -r`, `--files-from`, `--sync`): MLSD entries and which names are
//! safe to join under a destination, `--files-from` lines, sync verdicts, the retry schedule, and how many
//! sessions and streams a job's files get. No I/O, no clock: the runner in `job/mod.rs` does those.

use std::time::Duration;

pub use drsftp_proto::civil::parse_modify;

/// What an MLSD entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    /// `type=file`.
    File,
    /// `type=dir`.
    Dir,
    /// Anything else (`OS.unix=symlink`, `OS.unix=slink:/x`, devices): not copied.
    Other(String),
}

/// One usable entry of a remote directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteEntry {
    /// A single path component, checked by [`safe_component`].
    pub name: String,
    /// File, directory or other.
    pub kind: EntryKind,
    /// `size=`, if listed.
    pub size: Option<u64>,
    /// `modify=` as Unix seconds (UTC), if listed and valid.
    pub mtime: Option<i64>,
}

/// Why a name from a peer (or a file) cannot be used as one component under a destination directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UnsafeName {
    /// Empty.
    #[error("empty name")]
    Empty,
    /// `.` or `..`.
    #[error("`.` or `..`")]
    Dots,
    /// Contains `/` (more than one component, or absolute).
    #[error("contains '/'")]
    Slash,
    /// Contains NUL, CR or LF.
    #[error("contains a control character")]
    Control,
}

/// `name` if it is exactly one path component that cannot climb out of the directory it is joined to: a hostile
/// server listing `..`, `../x`, `/etc/passwd` or `a/b` gets those entries refused, never written.
pub fn safe_component(name: &str) -> Result<&str, UnsafeName> {
    if name.is_empty() {
        return Err(UnsafeName::Empty);
    }
    if name == "." || name == ".." {
        return Err(UnsafeName::Dots);
    }
    if name.contains('/') {
        return Err(UnsafeName::Slash);
    }
    if name.contains(['\0', '\r', '\n']) {
        return Err(UnsafeName::Control);
    }
    Ok(name)
}

/// Parses an MLSD listing (RFC 3659 §7: `fact=value;...; name` per line). `cdir`/`pdir` entries are dropped
/// silently; entries with unsafe names are returned as notes (`"name": why`) and never as entries.
pub fn parse_mlsd(text: &str) -> (Vec<RemoteEntry>, Vec<String>) {
    let mut entries = Vec::new();
    let mut notes = Vec::new();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        // The facts end at the first space; the name is everything after it (it may hold spaces itself).
        let Some((facts, name)) = line.split_once(' ') else {
            continue;
        };
        let mut kind = None;
        let (mut size, mut mtime) = (None, None);
        for f in facts.split(';') {
            let Some((k, v)) = f.split_once('=') else {
                continue;
            };
            match k.to_ascii_lowercase().as_str() {
                "type" => kind = Some(v.to_ascii_lowercase()),
                "size" => size = v.parse().ok(),
                "modify" => mtime = parse_modify(v),
                _ => {}
            }
        }
        let kind = match kind.as_deref() {
            Some("cdir" | "pdir") => continue,
            Some("file") => EntryKind::File,
            Some("dir") => EntryKind::Dir,
            Some(other) => EntryKind::Other(other.to_string()),
            None => EntryKind::Other("unknown".into()),
        };
        match safe_component(name) {
            Ok(n) => entries.push(RemoteEntry {
                name: n.to_string(),
                kind,
                size,
                mtime,
            }),
            // `.`/`..` without a cdir/pdir type are still just the directory and its parent.
            Err(UnsafeName::Dots) => {}
            Err(why) => notes.push(format!("listing entry {name:?} refused: {why}")),
        }
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    (entries, notes)
}

/// Unix seconds as `YYYYMMDDHHMMSS` (UTC), for `MFMT`.
pub fn format_modify(t: i64) -> String {
    let c = drsftp_proto::civil::civil(t);
    format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}",
        c.year, c.month, c.day, c.hour, c.min, c.sec
    )
}

/// `--sync`: what lets a file the destination already holds be skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Always copy.
    None,
    /// Skip if the destination exists.
    Exists,
    /// Skip if the destination has the source's size.
    Size,
    /// Skip if the sizes match and the destination is not older than the source (whole seconds): downloads set
    /// the local time from the server's, uploads get the server's arrival time unless it takes `MFMT`.
    #[default]
    Mtime,
    /// Skip if the sizes match and both ends' checksums agree.
    Checksum,
}

impl std::str::FromStr for SyncMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "none" | "off" => SyncMode::None,
            "exists" => SyncMode::Exists,
            "size" => SyncMode::Size,
            "mtime" => SyncMode::Mtime,
            "checksum" | "cksm" => SyncMode::Checksum,
            _ => {
                return Err(format!(
                    "{s:?}: expected none, exists, size, mtime or checksum"
                ))
            }
        })
    }
}

impl std::fmt::Display for SyncMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SyncMode::None => "none",
            SyncMode::Exists => "exists",
            SyncMode::Size => "size",
            SyncMode::Mtime => "mtime",
            SyncMode::Checksum => "checksum",
        })
    }
}

/// Size and modification time of one end of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// Bytes; `None` if the server did not say.
    pub size: Option<u64>,
    /// Unix seconds; `None` if unknown.
    pub mtime: Option<i64>,
}

/// What to do with one file given the sync mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncVerdict {
    /// Copy it.
    Copy,
    /// The destination already holds it.
    Skip,
    /// Sizes match: skip only if both ends' checksums agree (the runner asks).
    CompareChecksums,
}

/// The sync decision for a file whose source is `src` and whose destination is `dst` (`None`: not there, or not
/// a regular file). Unknown sizes or times never make a skip: a missing fact means copy.
pub fn sync_verdict(mode: SyncMode, src: Meta, dst: Option<Meta>) -> SyncVerdict {
    let Some(dst) = dst else {
        return SyncVerdict::Copy;
    };
    let same_size = matches!((src.size, dst.size), (Some(a), Some(b)) if a == b);
    let skip = match mode {
        SyncMode::None => false,
        SyncMode::Exists => true,
        SyncMode::Size => same_size,
        SyncMode::Mtime => {
            same_size && matches!((src.mtime, dst.mtime), (Some(s), Some(d)) if d >= s)
        }
        SyncMode::Checksum if same_size => return SyncVerdict::CompareChecksums,
        SyncMode::Checksum => false,
    };
    if skip {
        SyncVerdict::Skip
    } else {
        SyncVerdict::Copy
    }
}

/// `--retries`: how often a file is tried again after a transient failure, and how long to wait before each try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Further attempts after the first.
    pub retries: u32,
    /// Wait before the first retry; doubles each time.
    pub base: Duration,
    /// Longest wait.
    pub max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            retries: 3,
            base: Duration::from_millis(500),
            max: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The wait before retry number `retry` (1-based), or `None` once retries are used up. Exponential
    /// (base, 2·base, 4·base, ... up to `max`) so a server restarting or shedding load (421) gets time.
    pub fn delay(&self, retry: u32) -> Option<Duration> {
        if retry == 0 || retry > self.retries {
            return None;
        }
        let factor = 1u32.checked_shl(retry - 1).unwrap_or(u32::MAX);
        Some(self.base.saturating_mul(factor).min(self.max))
    }
}

/// Whether a server reply code is worth a retry: the 4xx "transient negative completion" class (RFC 959 §4.2:
/// 421 service not available, 425 no data connection, 426 transfer aborted, 450/451/452) is; 5xx is not.
pub fn transient_reply(code: u16) -> bool {
    (400..500).contains(&code)
}

/// Most control sessions `--concurrency auto` opens.
pub const AUTO_CONCURRENCY_MAX: usize = 8;

/// `--concurrency auto`: one session per file up to [`AUTO_CONCURRENCY_MAX`]; a job of large files (mean at least
/// 256 MiB, each already filling the path with parallel streams) gets at most 4, so sessions do not just compete
/// with each other's streams.
pub fn auto_concurrency(files: usize, total_bytes: u64) -> usize {
    if files == 0 {
        return 1;
    }
    let mean = total_bytes / files as u64;
    let cap = if mean >= 256 << 20 {
        4
    } else {
        AUTO_CONCURRENCY_MAX
    };
    files.clamp(1, cap)
}

/// Smallest share of a file each parallel stream gets: below it, another stream's set-up costs more than it adds.
pub const MIN_BYTES_PER_STREAM: u64 = 4 << 20;

/// Files below this move in stream mode on one connection (no MODE E headers, no extra connections).
pub const SMALL_FILE: u64 = 1 << 20;

/// Downloads of files up to this size go in pipelined batches (`Client::download_batch`): one MODE E stream kept
/// open across files. Past it a file's own stream count and DRS pay off more than the saved round trips.
pub const BATCH_MAX_FILE: u64 = 8 << 20;

/// Most files one worker takes for a batch: enough to keep the pipe full for many round trips, few enough that
/// the workers still share the last files of a job.
pub const BATCH_FILES: usize = 256;

/// The stream count for a file of `size` bytes when the job would use `wanted` streams: at least
/// [`MIN_BYTES_PER_STREAM`] per stream, and 1 for files below [`SMALL_FILE`] (a 64 KiB file never opens 64
/// streams). Unknown sizes keep `wanted`.
pub fn streams_for_size(size: Option<u64>, wanted: u32) -> u32 {
    let wanted = wanted.max(1);
    match size {
        None => wanted,
        Some(s) if s < SMALL_FILE => 1,
        Some(s) => {
            let by_size = u32::try_from(s / MIN_BYTES_PER_STREAM).unwrap_or(u32::MAX);
            wanted.min(by_size.max(1))
        }
    }
}

/// A `--files-from` line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct FilesFromError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// Parses a `--files-from` list (as globus-url-copy `-f`): one `SOURCE DESTINATION` pair per line, separated by
/// white space; either may be quoted with `"..."` (backslash escapes `\"` and `\\`) or `'...'` (literal) to hold
/// spaces; blank lines and `#` comments (a line starting with `#`, or `#` after white space outside quotes) are
/// ignored. Returns the pairs with their line numbers.
pub fn parse_files_from(text: &str) -> Result<Vec<(usize, String, String)>, FilesFromError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        let err = |message: String| FilesFromError {
            line: line_no,
            message,
        };
        let words = split_words(line).map_err(err)?;
        match words.len() {
            0 => {}
            2 => {
                let mut w = words.into_iter();
                let (a, b) = (w.next().unwrap_or_default(), w.next().unwrap_or_default());
                out.push((line_no, a, b));
            }
            n => {
                return Err(err(format!(
                    "expected a source and a destination, found {n} field{}",
                    if n == 1 { "" } else { "s" }
                )))
            }
        }
    }
    Ok(out)
}

/// Splits one line into shell-like words (see [`parse_files_from`]).
fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        match chars.peek() {
            None | Some('#') => return Ok(words),
            _ => {}
        }
        let mut w = String::new();
        while let Some(&c) = chars.peek() {
            if c.is_whitespace() {
                break;
            }
            chars.next();
            match c {
                '"' => loop {
                    match chars.next() {
                        None => return Err("unterminated \" quote".into()),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\')) => w.push(e),
                            Some(o) => {
                                w.push('\\');
                                w.push(o);
                            }
                            None => return Err("unterminated \" quote".into()),
                        },
                        Some(o) => w.push(o),
                    }
                },
                '\'' => loop {
                    match chars.next() {
                        None => return Err("unterminated ' quote".into()),
                        Some('\'') => break,
                        Some(o) => w.push(o),
                    }
                },
                o => w.push(o),
            }
        }
        words.push(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_listing_names_are_refused() {
        let text = "type=cdir;modify=20261122145117; /d\r\n\
                    type=pdir; ..\r\n\
                    type=file;size=3;modify=20261122145117; ok name.bin\r\n\
                    type=file;size=3; ../escape\r\n\
                    type=file;size=3; /etc/passwd\r\n\
                    type=dir; a/b\r\n\
                    type=file;size=1; ..\r\n\
                    type=dir;size=0; -dash dir\r\n\
                    type=OS.unix=slink:/etc;size=0; link\r\n\
                    nofacts\r\n";
        let (e, notes) = parse_mlsd(text);
        let names: Vec<&str> = e.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["-dash dir", "link", "ok name.bin"]);
        assert_eq!(e[0].kind, EntryKind::Dir);
        assert_eq!(e[1].kind, EntryKind::Other("os.unix=slink:/etc".into()));
        assert_eq!(e[2].kind, EntryKind::File);
        assert_eq!(e[2].size, Some(3));
        assert_eq!(e[2].mtime, Some(1_795_359_077));
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(notes.iter().all(|n| n.contains("refused")));
        assert_eq!(safe_component("a\nb"), Err(UnsafeName::Control));
        assert_eq!(safe_component(""), Err(UnsafeName::Empty));
        assert_eq!(safe_component("ünï cödé"), Ok("ünï cödé"));
    }

    #[test]
    fn modify_times_round_trip() {
        assert_eq!(parse_modify("19700101000000"), Some(0));
        assert_eq!(parse_modify("20000301000000.123"), Some(951_868_800));
        assert_eq!(format_modify(951_868_800), "20000301000000");
        for t in [0, 1, 86_399, 951_782_400, 1_795_359_077, 4_102_444_800] {
            assert_eq!(parse_modify(&format_modify(t)), Some(t), "{t}");
        }
        assert_eq!(parse_modify("2026112214511"), None);
        assert_eq!(parse_modify("20261322145117"), None);
        assert_eq!(parse_modify("2026112214511x"), None);
    }

    #[test]
    fn sync_verdicts() {
        let m = |size, mtime| Meta {
            size: Some(size),
            mtime: Some(mtime),
        };
        use SyncVerdict::*;
        assert_eq!(sync_verdict(SyncMode::Mtime, m(5, 100), None), Copy);
        assert_eq!(
            sync_verdict(SyncMode::None, m(5, 100), Some(m(5, 100))),
            Copy
        );
        assert_eq!(
            sync_verdict(SyncMode::Exists, m(5, 100), Some(m(0, 0))),
            Skip
        );
        assert_eq!(sync_verdict(SyncMode::Size, m(5, 100), Some(m(5, 0))), Skip);
        assert_eq!(
            sync_verdict(SyncMode::Size, m(5, 100), Some(m(4, 100))),
            Copy
        );
        assert_eq!(
            sync_verdict(SyncMode::Mtime, m(5, 100), Some(m(5, 100))),
            Skip
        );
        assert_eq!(
            sync_verdict(SyncMode::Mtime, m(5, 100), Some(m(5, 101))),
            Skip
        );
        assert_eq!(
            sync_verdict(SyncMode::Mtime, m(5, 100), Some(m(5, 99))),
            Copy
        );
        assert_eq!(
            sync_verdict(SyncMode::Mtime, m(5, 100), Some(m(6, 200))),
            Copy
        );
        let unknown = Meta {
            size: None,
            mtime: None,
        };
        assert_eq!(sync_verdict(SyncMode::Size, unknown, Some(unknown)), Copy);
        assert_eq!(
            sync_verdict(SyncMode::Mtime, m(5, 100), Some(unknown)),
            Copy
        );
        assert_eq!(
            sync_verdict(SyncMode::Checksum, m(5, 100), Some(m(5, 1))),
            CompareChecksums
        );
        assert_eq!(
            sync_verdict(SyncMode::Checksum, m(5, 100), Some(m(6, 1))),
            Copy
        );
        assert_eq!("CHECKSUM".parse::<SyncMode>(), Ok(SyncMode::Checksum));
        assert!("often".parse::<SyncMode>().is_err());
    }

    #[test]
    fn retry_schedule_doubles_up_to_the_cap() {
        let p = RetryPolicy::default();
        let d: Vec<_> = (0..=5).map(|i| p.delay(i)).collect();
        assert_eq!(
            d,
            [
                None,
                Some(Duration::from_millis(500)),
                Some(Duration::from_secs(1)),
                Some(Duration::from_secs(2)),
                None,
                None
            ]
        );
        let long = RetryPolicy { retries: 40, ..p };
        assert_eq!(long.delay(40), Some(Duration::from_secs(30)));
        assert_eq!(RetryPolicy { retries: 0, ..p }.delay(1), None);
        assert!(transient_reply(421) && transient_reply(451) && transient_reply(426));
        assert!(!transient_reply(550) && !transient_reply(226));
    }

    #[test]
    fn concurrency_and_streams_follow_the_files() {
        assert_eq!(auto_concurrency(0, 0), 1);
        assert_eq!(auto_concurrency(3, 3 << 20), 3);
        assert_eq!(auto_concurrency(1000, 1000 << 16), AUTO_CONCURRENCY_MAX);
        assert_eq!(auto_concurrency(10, 10 << 30), 4);
        assert_eq!(streams_for_size(Some(64 << 10), 64), 1);
        assert_eq!(streams_for_size(Some(0), 8), 1);
        assert_eq!(streams_for_size(Some(8 << 20), 64), 2);
        assert_eq!(streams_for_size(Some(1 << 30), 8), 8);
        assert_eq!(streams_for_size(Some(2 << 20), 4), 1);
        assert_eq!(streams_for_size(None, 4), 4);
    }

    #[test]
    fn files_from_lines() {
        let text = "# a comment\n\
                    \n\
                    ftp://h/a /tmp/a\n\
                    \t\"ftp://h/with space\"   '/tmp/it''s'  # trailing\n\
                    \"/x/q\\\"uote\" ftp://h/y\n\
                    /a#b /c\n";
        let p = parse_files_from(text).unwrap();
        assert_eq!(
            p,
            [
                (3, "ftp://h/a".to_string(), "/tmp/a".to_string()),
                (4, "ftp://h/with space".into(), "/tmp/its".into()),
                (5, "/x/q\"uote".into(), "ftp://h/y".into()),
                (6, "/a#b".into(), "/c".into()),
            ]
        );
        let e = parse_files_from("a b\nonly\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("found 1 field"));
        assert_eq!(parse_files_from("a b c").unwrap_err().line, 1);
        assert!(parse_files_from("\"a b")
            .unwrap_err()
            .message
            .contains("unterminated"));
        assert!(parse_files_from("").unwrap().is_empty());
    }
}
