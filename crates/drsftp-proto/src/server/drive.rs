//! A scripted driver for [`ServerSession`], shared by the property test (`fuzz.rs`) and the cargo-fuzz target
//! `server_control`: the steps either one takes (bytes in, command lines, filesystem answers, listen results,
//! progress, transfer ends, clock jumps, SBUF notices), the fake answers a step gets, the invariants checked after
//! each step, and the check that everything the session wrote is well-formed FTP replies. Only the way the steps
//! are generated differs between the two (proptest strategies there, `arbitrary` bytes in the fuzz target).
//! Compiled for tests and with the `drive` feature (the fuzz crate's), never into the product.

use std::net::SocketAddr;
use std::ops::Range;
use std::time::{Duration, Instant, UNIX_EPOCH};

use drsftp_storage::{EntryKind, Metadata, StorageError};

use super::{
    Action, FsResult, LoginVerdict, Mode, Payload, ServerConfig, ServerSession, TransferProgress,
    TransferResult,
};
use crate::ranges::RangeSet;

/// Verbs a step's command line starts with: every verb the server knows, one it does not, and an empty one.
pub const VERBS: &[&str] = &[
    "USER", "PASS", "QUIT", "NOOP", "SYST", "HELP", "FEAT", "OPTS", "STAT", "TYPE", "MODE", "STRU",
    "ALLO", "PWD", "CWD", "CDUP", "MKD", "RMD", "DELE", "RNFR", "RNTO", "SIZE", "MDTM", "MLST",
    "MLSD", "LIST", "NLST", "PASV", "EPSV", "SPAS", "PORT", "EPRT", "SPOR", "BPAS", "BPRT", "RETR",
    "ERET", "STOR", "APPE", "ESTO", "REST", "ABOR", "SBUF", "SITE", "CKSM", "AUTH", "PBSZ", "PROT",
    "XPWD", "BOGUS", "",
];

/// Arguments, many of them hostile: traversal, overflowing numbers, ports a client must not name, control bytes.
pub const ARGS: &[&str] = &[
    "",
    "u",
    "p",
    "anonymous",
    "/f",
    "../../x",
    "P 1 2 /f",
    "P 18446744073709551615 18446744073709551615 /f",
    "A 5 /f",
    "A 18446744073709551615 /f",
    "127,0,0,1,4,1",
    "127,0,0,1,0,1",
    "127,0,0,1,4,1 127,0,0,1,4,2",
    "|1|127.0.0.1|5000|",
    "|2|::1|5000|",
    "0-10,20-30",
    "18446744073709551615",
    "0-18446744073709551615",
    "RETR Parallelism=4,4,4;",
    "RETR Parallelism=1,1,64;",
    "RETR Parallelism=99999999999;",
    "DRS Inband=1;",
    "BLAST MTU=1500;Rate=100000000;",
    "MLST type;",
    "MLST type;size;",
    "MD5 0 -1 /f",
    "CRC32C 0 -1 /f",
    "ADLER32 5 18446744073709551615 /f",
    "I",
    "E",
    "S",
    "A",
    "L 8",
    "RETRBUFSIZE 4194304",
    "1 2",
    "1 65536",
    "TLS",
    "ALL",
    "-la",
    "\u{0}\u{1b}[31m\u{7f}",
];

/// Lines that start (or interrupt) transfers, so random sessions reach the transfer states often.
pub const TRANSFER_LINES: &[&str] = &[
    "RETR /f",
    "STOR /f",
    "APPE /f",
    "ESTO A 7 /f",
    "ERET P 3 100 /f",
    "LIST",
    "MLSD /",
    "ABOR",
    "STAT",
    "MODE E",
    "MODE S",
    "REST 0-10,20-30",
    "REST 5",
    "SBUF 1 65536",
    "OPTS DRS Inband=1;",
    "OPTS DRS Inband=0;",
    "PASV",
    "PORT 127,0,0,1,4,1",
    "QUIT",
];

/// One thing the driver does to the session.
#[derive(Debug, Clone)]
pub enum Step {
    /// Raw bytes on the control connection.
    Bytes(Vec<u8>),
    /// A command line (CRLF added).
    Line(String),
    /// An answer to whatever filesystem request is (or is not) outstanding: [`fs_result`] of the three.
    Fs(u8, u64, String),
    /// A listen result for `PASV`-like verbs: failure, no address, two, or one on the port.
    Listen(u8, u16),
    /// Transfer progress: bytes, ranges as (offset, length), one marker count per stripe.
    Progress(u64, Vec<(u64, u64)>, Vec<u64>),
    /// A transfer end: for the current transfer or a made-up id; ok, failed with `code`, or aborted.
    Done(bool, u8, u16),
    /// The clock moves on; a due timeout fires.
    Wait(Duration),
    /// The client's epoch for `SITE`-style time answers, any float.
    Epoch(f64),
    /// The driver asks to send an in-band SBUF notice.
    SbufNotice(u64, u64),
}

/// Runs `steps` through a fresh session under `cfg` (the fake credential store accepts user `u`, password `p`),
/// checking after each step that:
/// * an SBUF notice goes out only in a transfer with in-band DRS on;
/// * `SBUF <id> <size>` is acted on only after `OPTS DRS Inband=1`;
/// * every transfer has parallelism ≥ 1, in-band DRS only in MODE E, and no empty range to send;
/// * a session with a timeout pending is not closed;
///
/// and, at the end, that the whole output is well-formed replies ([`check_replies`]). Returns that output.
pub fn run(cfg: ServerConfig, steps: impl IntoIterator<Item = Step>) -> Result<Vec<u8>, String> {
    let mut now = Instant::now();
    let local: SocketAddr = "127.0.0.1:2811".parse().expect("literal address");
    let peer: SocketAddr = "127.0.0.1:50000".parse().expect("literal address");
    let mut s = ServerSession::new(now, cfg, local, peer);
    let mut out = Vec::new();
    let mut transfer: Option<u64> = None;
    for step in steps {
        match step {
            Step::Bytes(b) => s.handle_input(now, &b),
            Step::Line(l) => s.handle_input(now, format!("{l}\r\n").as_bytes()),
            Step::Fs(k, n, t) => s.handle_fs(now, fs_result(k, n, &t)),
            Step::Listen(k, p) => {
                let a = SocketAddr::new(local.ip(), p);
                let r = match k % 4 {
                    0 => Err("bind failed\r\n500 injected".to_string()),
                    1 => Ok(vec![]),
                    2 => Ok(vec![a, a]),
                    _ => Ok(vec![a]),
                };
                s.handle_listening(now, r);
            }
            Step::Progress(bytes, ranges, stripes) => s.handle_progress(
                now,
                TransferProgress {
                    bytes,
                    ranges: ranges
                        .into_iter()
                        .map(|(a, l)| a..a.saturating_add(l))
                        .collect::<RangeSet>(),
                    stripes,
                },
            ),
            Step::Done(current, k, code) => {
                let id = if current {
                    transfer.unwrap_or(0)
                } else {
                    u64::from(k)
                };
                let r = match k % 3 {
                    0 => TransferResult::Ok {
                        bytes: u64::from(code),
                        streams: 1,
                    },
                    1 => TransferResult::Failed {
                        code,
                        message: format!("x\r\n{code}"),
                    },
                    _ => TransferResult::Aborted,
                };
                s.handle_transfer_done(now, id, r);
            }
            Step::Wait(d) => {
                now += d;
                if s.poll_timeout().is_some_and(|t| t <= now) {
                    s.handle_timeout(now);
                }
            }
            Step::Epoch(e) => s.set_epoch(now, e),
            Step::SbufNotice(id, size) => {
                if s.send_sbuf_notice(now, id, size) && !(s.drs_inband() && s.is_transferring()) {
                    return Err("an SBUF notice went out outside an in-band DRS transfer".into());
                }
            }
        }
        while let Some(b) = s.poll_transmit() {
            out.extend_from_slice(&b);
        }
        while let Some(a) = s.poll_action() {
            match a {
                Action::CheckLogin { user, password } => {
                    let ok = user == "u" && password.0 == "p";
                    let verdict = if ok {
                        LoginVerdict::Granted { read_only: false }
                    } else {
                        LoginVerdict::Denied
                    };
                    s.handle_login(now, verdict);
                }
                Action::SetBuffer { .. } if !s.drs_inband() => {
                    return Err("SBUF <id> <size> accepted without OPTS DRS".into());
                }
                Action::Transfer(p) => {
                    if p.parallelism < 1 {
                        return Err(format!("a transfer with parallelism {}", p.parallelism));
                    }
                    if p.inband_drs && !(s.drs_inband() && p.mode == Mode::Extended) {
                        return Err("in-band DRS on a transfer that cannot carry it".into());
                    }
                    if let Payload::SendFile { ranges, .. } = &p.payload {
                        if let Some(r) = ranges.iter().find(|r: &&Range<u64>| r.start >= r.end) {
                            return Err(format!("an empty range {r:?} to send"));
                        }
                    }
                    transfer = Some(p.id);
                }
                _ => {}
            }
        }
        if s.poll_timeout().is_some() && s.is_closed() {
            return Err("a closed session with a timeout pending".into());
        }
    }
    check_replies(&out)?;
    Ok(out)
}

/// A file's metadata made from a step's numbers: file, directory or other by `k`, sized and dated by `n`.
fn metadata(k: u8, n: u64, name: &str) -> Metadata {
    Metadata {
        name: name.to_string(),
        kind: [EntryKind::File, EntryKind::Dir, EntryKind::Other][usize::from(k % 3)],
        size: n,
        modified: UNIX_EPOCH + Duration::from_secs(n % (1 << 40)),
        mode: (n % 0o10000) as u32,
    }
}

/// A filesystem answer made from a step's numbers: mostly files, then other kinds, listings, plain success, a
/// checksum of any text, and the two refusals.
fn fs_result(k: u8, n: u64, s: &str) -> FsResult {
    match k % 10 {
        0..=2 => FsResult::Stat(metadata(0, n, s)),
        3 | 4 => FsResult::Stat(metadata(k, n, s)),
        5 => FsResult::List((0..(n % 5)).map(|i| metadata(i as u8, n ^ i, s)).collect()),
        6 => FsResult::Done,
        7 => FsResult::Checksum(s.to_string()),
        8 => FsResult::Err(StorageError::NotFound(s.to_string())),
        _ => FsResult::Err(StorageError::InvalidPath(s.to_string())),
    }
}

/// Checks a reply byte stream: CRLF-terminated lines, each `ddd text` or a `ddd-` … `ddd ` block whose inner lines
/// start with a space, codes 100-599, no stray CR or LF. Returns the number of complete replies.
pub fn check_replies(out: &[u8]) -> Result<usize, String> {
    let text = std::str::from_utf8(out).map_err(|e| e.to_string())?;
    if text.is_empty() {
        return Ok(0);
    }
    let body = text
        .strip_suffix("\r\n")
        .ok_or_else(|| format!("output does not end in CRLF: {text:?}"))?;
    let mut open: Option<&str> = None;
    let mut replies = 0;
    for line in body.split("\r\n") {
        if line.contains('\r') || line.contains('\n') {
            return Err(format!("stray CR/LF in {line:?}"));
        }
        let code = line
            .get(..3)
            .filter(|c| c.bytes().all(|b| b.is_ascii_digit()));
        match open {
            None => {
                let code = code.ok_or_else(|| format!("no reply code: {line:?}"))?;
                if !(100..=599).contains(&code.parse::<u16>().unwrap_or(0)) {
                    return Err(format!("bad code: {line:?}"));
                }
                match line.as_bytes().get(3) {
                    Some(b' ') => replies += 1,
                    Some(b'-') => open = Some(code),
                    _ => return Err(format!("bad separator: {line:?}")),
                }
            }
            Some(c) => {
                if code == Some(c) && line.as_bytes().get(3) == Some(&b' ') {
                    open = None;
                    replies += 1;
                } else if !line.starts_with(' ') {
                    return Err(format!("continuation line without leading space: {line:?}"));
                }
            }
        }
    }
    match open {
        None => Ok(replies),
        Some(c) => Err(format!("unterminated {c}- reply")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_checker_catches_malformed_output() {
        assert_eq!(
            check_replies(b"200 ok\r\n211-a\r\n b\r\n211 End.\r\n"),
            Ok(2)
        );
        assert!(check_replies(b"200 ok").is_err());
        assert!(check_replies(b"20 ok\r\n").is_err());
        assert!(check_replies(b"211-a\r\nb\r\n211 End.\r\n").is_err());
        assert!(check_replies(b"211-a\r\n").is_err());
        assert!(check_replies(b"200 a\rb\r\n").is_err());
        assert!(check_replies(b"700 x\r\n").is_err());
    }

    #[test]
    fn a_login_and_a_passive_retrieve_reply_well_formed() {
        let steps = [
            Step::Line("USER u".into()),
            Step::Line("PASS p".into()),
            Step::Line("PASV".into()),
            Step::Listen(3, 40000),
            Step::Line("RETR /f".into()),
            Step::Fs(0, 100, "f".into()),
            Step::Done(true, 0, 100),
            Step::Line("QUIT".into()),
        ];
        let out = run(ServerConfig::default(), steps).unwrap();
        let codes: Vec<&str> = std::str::from_utf8(&out)
            .unwrap()
            .lines()
            .filter(|l| l.as_bytes().get(3) == Some(&b' '))
            .map(|l| &l[..3])
            .collect();
        assert_eq!(
            codes,
            ["220", "331", "230", "227", "150", "226", "221"],
            "{}",
            String::from_utf8_lossy(&out)
        );
    }
}
