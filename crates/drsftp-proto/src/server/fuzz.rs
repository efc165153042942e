//! Property tests: random bytes, random command lines and random (even nonsensical) driver answers never panic
//! the session, and everything it writes is well-formed FTP replies: `ddd text` or a `ddd-` … `ddd ` block whose
//! inner lines start with a space, every line ending in CRLF, no stray CR or LF.

use std::net::SocketAddr;
use std::time::{Duration, Instant, UNIX_EPOCH};

use drsftp_storage::{EntryKind, Metadata, StorageError};
use proptest::prelude::*;

use super::*;
use crate::ranges::RangeSet;

/// Checks a reply byte stream; returns the number of complete replies.
fn check_replies(out: &[u8]) -> Result<usize, String> {
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

#[derive(Debug, Clone)]
enum Op {
    Bytes(Vec<u8>),
    Line(String),
    Fs(u8, u64, String),
    Listen(u8, u16),
    Progress(u64, Vec<(u64, u64)>),
    Done(bool, u8, u16),
    Wait(u64),
    Epoch(f64),
    SbufNotice(u64, u64),
}

const VERBS: &[&str] = &[
    "USER", "PASS", "QUIT", "NOOP", "SYST", "HELP", "FEAT", "OPTS", "STAT", "TYPE", "MODE", "STRU",
    "ALLO", "PWD", "CWD", "CDUP", "MKD", "RMD", "DELE", "RNFR", "RNTO", "SIZE", "MDTM", "MLST",
    "MLSD", "LIST", "NLST", "PASV", "EPSV", "SPAS", "PORT", "EPRT", "SPOR", "RETR", "ERET", "STOR",
    "APPE", "ESTO", "REST", "ABOR", "SBUF", "SITE", "CKSM", "XPWD", "BOGUS", "",
];

const ARGS: &[&str] = &[
    "",
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
    "RETR Parallelism=99999999999;",
    "MLST type;",
    "MD5 0 -1 /f",
    "ADLER32 5 18446744073709551615 /f",
    "I",
    "E",
    "A",
    "L 8",
    "RETRBUFSIZE 4194304",
    "1 2",
    "ALL",
    "-la",
    "\u{0}\u{1b}[31m\u{7f}",
];

/// Lines that start (or interrupt) transfers, so random sessions reach the transfer states often.
const TRANSFER_LINES: &[&str] = &[
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

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (proptest::collection::vec(any::<u8>(), 0..80), any::<bool>()).prop_map(|(mut b, nl)| {
            if nl {
                b.push(b'\n');
            }
            Op::Bytes(b)
        }),
        3 => (0..TRANSFER_LINES.len()).prop_map(|i| Op::Line(TRANSFER_LINES[i].to_string())),
        6 => (0..VERBS.len(), 0..ARGS.len(), ".{0,12}", any::<bool>()).prop_map(|(v, a, junk, use_junk)| {
            let arg = if use_junk { junk } else { ARGS[a].to_string() };
            Op::Line(format!("{} {arg}", VERBS[v]))
        }),
        3 => (any::<u8>(), any::<u64>(), "[0-9a-fA-F]{0,8}|.{0,6}").prop_map(|(k, n, s)| Op::Fs(k, n, s)),
        1 => (any::<u8>(), any::<u16>()).prop_map(|(k, p)| Op::Listen(k, p)),
        2 => (any::<u64>(), proptest::collection::vec((prop_oneof![0u64..1 << 24, any::<u64>()], 0u64..1 << 20), 0..6))
            .prop_map(|(b, r)| Op::Progress(b, r)),
        3 => (any::<bool>(), any::<u8>(), any::<u16>()).prop_map(|(cur, k, c)| Op::Done(cur, k, c)),
        2 => (0u64..20_000).prop_map(Op::Wait),
        1 => prop_oneof![Just(f64::NAN), Just(-1.0), Just(1.7e9), any::<f64>()].prop_map(Op::Epoch),
        1 => (any::<u64>(), any::<u64>()).prop_map(|(i, n)| Op::SbufNotice(i, n)),
    ]
}

fn metadata(k: u8, n: u64, name: &str) -> Metadata {
    Metadata {
        name: name.to_string(),
        kind: [EntryKind::File, EntryKind::Dir, EntryKind::Other][usize::from(k % 3)],
        size: n,
        modified: UNIX_EPOCH + Duration::from_secs(n % (1 << 40)),
        mode: (n % 0o10000) as u32,
    }
}

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

fn run(cfg: ServerConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let mut now = Instant::now();
    let local: SocketAddr = "127.0.0.1:2811".parse().unwrap();
    let peer: SocketAddr = "127.0.0.1:50000".parse().unwrap();
    let mut s = ServerSession::new(now, cfg, local, peer);
    let mut out = Vec::new();
    let mut transfer: Option<u64> = None;
    for op in ops {
        match op {
            Op::Bytes(b) => s.handle_input(now, &b),
            Op::Line(l) => s.handle_input(now, format!("{l}\r\n").as_bytes()),
            Op::Fs(k, n, t) => s.handle_fs(now, fs_result(k, n, &t)),
            Op::Listen(k, p) => {
                let a = SocketAddr::new(local.ip(), p);
                let r = match k % 4 {
                    0 => Err("bind failed\r\n500 injected".to_string()),
                    1 => Ok(vec![]),
                    2 => Ok(vec![a, a]),
                    _ => Ok(vec![a]),
                };
                s.handle_listening(now, r);
            }
            Op::Progress(b, r) => s.handle_progress(
                now,
                TransferProgress {
                    bytes: b,
                    ranges: r
                        .into_iter()
                        .map(|(a, l)| a..a.saturating_add(l))
                        .collect::<RangeSet>(),
                    stripes: vec![],
                },
            ),
            Op::Done(cur, k, code) => {
                let id = if cur {
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
            Op::Wait(ms) => {
                now += Duration::from_millis(ms);
                if s.poll_timeout().is_some_and(|t| t <= now) {
                    s.handle_timeout(now);
                }
            }
            Op::Epoch(e) => s.set_epoch(now, e),
            Op::SbufNotice(id, size) => {
                let sent = s.send_sbuf_notice(now, id, size);
                prop_assert!(!sent || (s.drs_inband() && s.is_transferring()));
            }
        }
        while let Some(b) = s.poll_transmit() {
            out.extend_from_slice(&b);
        }
        while let Some(a) = s.poll_action() {
            if let Action::CheckLogin { user, password } = &a {
                // The fake credential store: user `u`, password `p`.
                let ok = user == "u" && password.0 == "p";
                s.handle_login(
                    now,
                    if ok {
                        LoginVerdict::Granted { read_only: false }
                    } else {
                        LoginVerdict::Denied
                    },
                );
            }
            if let Action::SetBuffer { .. } = a {
                prop_assert!(s.drs_inband(), "SBUF <id> <size> accepted without OPTS DRS");
            }
            if let Action::Transfer(p) = a {
                prop_assert!(p.parallelism >= 1);
                prop_assert!(!p.inband_drs || (s.drs_inband() && p.mode == Mode::Extended));
                if let Payload::SendFile { ranges, .. } = &p.payload {
                    prop_assert!(ranges.iter().all(|r| r.start < r.end));
                }
                transfer = Some(p.id);
            }
        }
        if let Some(t) = s.poll_timeout() {
            prop_assert!(!s.is_closed());
            let _ = t;
        }
    }
    check_replies(&out).map_err(TestCaseError::fail)?;
    Ok(())
}

fn config() -> impl Strategy<Value = ServerConfig> {
    (
        prop_oneof![1 => 1usize..16, 9 => 16usize..300],
        0u64..3,
        any::<bool>(),
        0u32..5,
    )
        .prop_map(|(max_line, marker, anonymous, par)| ServerConfig {
            max_line,
            marker_interval: Duration::from_secs(marker),
            anonymous,
            idle_timeout: Duration::from_secs(300),
            default_parallelism: par,
            max_parallelism: par,
            ..ServerConfig::default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

    #[test]
    fn random_sessions_never_panic_and_reply_well_formed(
        cfg in config(),
        login in proptest::bool::weighted(0.85),
        ops in proptest::collection::vec(op(), 0..60),
    ) {
        let mut all = Vec::new();
        if login {
            all.push(Op::Line("USER u".into()));
            all.push(Op::Line("PASS p".into()));
            all.push(Op::Line("PASV".into()));
            all.push(Op::Listen(3, 40000));
        }
        all.extend(ops);
        run(cfg, all)?;
    }

    #[test]
    fn random_bytes_never_panic(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..512), 0..8)) {
        let ops = std::iter::once(Op::Line("USER anonymous".into()))
            .chain(std::iter::once(Op::Line("PASS x".into())))
            .chain(chunks.into_iter().map(Op::Bytes))
            .collect();
        run(ServerConfig::default(), ops)?;
    }
}

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
