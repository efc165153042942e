//! Fuzz target: a whole server control session driven by fuzzer-chosen input — raw bytes, command lines built
//! from the verbs and hostile arguments, and arbitrary (even nonsensical) driver answers and clock jumps.
//! Checks: no panic, and everything the session writes is well-formed FTP replies (CRLF lines, codes 100-599,
//! multi-line blocks closed).
#![no_main]

use std::net::SocketAddr;
use std::time::{Duration, Instant, UNIX_EPOCH};

use arbitrary::Arbitrary;
use drsftp_proto::ranges::RangeSet;
use drsftp_proto::server::{
    Action, FsResult, LoginVerdict, ServerConfig, ServerSession, TransferProgress, TransferResult,
};
use drsftp_storage::{EntryKind, Metadata, StorageError};
use libfuzzer_sys::fuzz_target;

const VERBS: &[&str] = &[
    "USER", "PASS", "QUIT", "NOOP", "SYST", "HELP", "FEAT", "OPTS", "STAT", "TYPE", "MODE", "STRU",
    "ALLO", "PWD", "CWD", "CDUP", "MKD", "RMD", "DELE", "RNFR", "RNTO", "SIZE", "MDTM", "MLST",
    "MLSD", "LIST", "NLST", "PASV", "EPSV", "SPAS", "PORT", "EPRT", "SPOR", "BPAS", "BPRT", "RETR",
    "ERET", "STOR", "APPE", "ESTO", "REST", "ABOR", "SBUF", "SITE", "CKSM", "AUTH", "PBSZ", "PROT",
];

const ARGS: &[&str] = &[
    "",
    "u",
    "p",
    "anonymous",
    "/f",
    "../../x",
    "P 1 2 /f",
    "P 18446744073709551615 18446744073709551615 /f",
    "A 5 /f",
    "127,0,0,1,4,1",
    "127,0,0,1,0,1",
    "127,0,0,1,4,1 127,0,0,1,4,2",
    "|1|127.0.0.1|5000|",
    "|2|::1|5000|",
    "0-10,20-30",
    "18446744073709551615",
    "RETR Parallelism=4,4,4;",
    "RETR Parallelism=1,1,64;",
    "DRS Inband=1;",
    "BLAST MTU=1500;Rate=100000000;",
    "MLST type;size;",
    "MD5 0 -1 /f",
    "CRC32C 0 -1 /f",
    "I",
    "E",
    "S",
    "RETRBUFSIZE 4194304",
    "1 65536",
    "TLS",
    "-la",
];

#[derive(Arbitrary, Debug)]
enum Op {
    Bytes(Vec<u8>),
    Line {
        verb: u8,
        arg: u8,
    },
    RawLine {
        verb: u8,
        arg: String,
    },
    Fs {
        kind: u8,
        n: u64,
        text: String,
    },
    Listen {
        kind: u8,
        port: u16,
    },
    Progress {
        bytes: u64,
        ranges: Vec<(u32, u16)>,
        stripes: Vec<u32>,
    },
    Done {
        current: bool,
        kind: u8,
        code: u16,
    },
    Wait {
        ms: u16,
    },
    SbufNotice {
        id: u64,
        size: u64,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    anonymous: bool,
    max_line: u8,
    login: bool,
    ops: Vec<Op>,
}

fn metadata(kind: u8, n: u64, name: &str) -> Metadata {
    Metadata {
        name: name.to_string(),
        kind: [EntryKind::File, EntryKind::Dir, EntryKind::Other][usize::from(kind % 3)],
        size: n,
        modified: UNIX_EPOCH + Duration::from_secs(n % (1 << 40)),
        mode: (n % 0o10000) as u32,
    }
}

fn fs_result(kind: u8, n: u64, text: &str) -> FsResult {
    match kind % 8 {
        0..=2 => FsResult::Stat(metadata(kind, n, text)),
        3 => FsResult::List(
            (0..(n % 5))
                .map(|i| metadata(i as u8, n ^ i, text))
                .collect(),
        ),
        4 => FsResult::Done,
        5 => FsResult::Checksum(text.to_string()),
        6 => FsResult::Err(StorageError::NotFound(text.to_string())),
        _ => FsResult::Err(StorageError::InvalidPath(text.to_string())),
    }
}

/// Checks a reply byte stream: CRLF-terminated lines, `ddd text` or a closed `ddd-` ... `ddd ` block.
fn check_replies(out: &[u8]) {
    let text = std::str::from_utf8(out).expect("replies are UTF-8");
    if text.is_empty() {
        return;
    }
    let body = text.strip_suffix("\r\n").expect("output ends in CRLF");
    let mut open: Option<&str> = None;
    for line in body.split("\r\n") {
        assert!(
            !line.contains('\r') && !line.contains('\n'),
            "stray CR/LF in {line:?}"
        );
        let code = line
            .get(..3)
            .filter(|c| c.bytes().all(|b| b.is_ascii_digit()));
        match open {
            None => {
                let code = code.unwrap_or_else(|| panic!("no reply code: {line:?}"));
                assert!(
                    (100..=599).contains(&code.parse::<u16>().unwrap_or(0)),
                    "{line:?}"
                );
                match line.as_bytes().get(3) {
                    Some(b' ') => {}
                    Some(b'-') => open = Some(code),
                    _ => panic!("bad separator: {line:?}"),
                }
            }
            Some(c) => {
                if code == Some(c) && line.as_bytes().get(3) == Some(&b' ') {
                    open = None;
                } else {
                    assert!(
                        line.starts_with(' '),
                        "continuation without a space: {line:?}"
                    );
                }
            }
        }
    }
    assert!(open.is_none(), "unterminated multi-line reply");
}

fuzz_target!(|input: Input| {
    let mut now = Instant::now();
    let cfg = ServerConfig {
        anonymous: input.anonymous,
        max_line: 16 + usize::from(input.max_line) * 4,
        marker_interval: Duration::from_secs(1),
        ..ServerConfig::default()
    };
    let local: SocketAddr = "127.0.0.1:2811".parse().unwrap();
    let peer: SocketAddr = "127.0.0.1:50000".parse().unwrap();
    let mut s = ServerSession::new(now, cfg, local, peer);
    let mut out = Vec::new();
    let mut transfer = None;
    let login = [Op::Line { verb: 0, arg: 1 }, Op::Line { verb: 1, arg: 2 }];
    let ops = input
        .login
        .then_some(login)
        .into_iter()
        .flatten()
        .chain(input.ops);
    for op in ops.take(200) {
        match op {
            Op::Bytes(b) => s.handle_input(now, &b),
            Op::Line { verb, arg } => {
                let v = VERBS[usize::from(verb) % VERBS.len()];
                let a = ARGS[usize::from(arg) % ARGS.len()];
                s.handle_input(now, format!("{v} {a}\r\n").as_bytes());
            }
            Op::RawLine { verb, arg } => {
                let v = VERBS[usize::from(verb) % VERBS.len()];
                s.handle_input(now, format!("{v} {arg}\r\n").as_bytes());
            }
            Op::Fs { kind, n, text } => s.handle_fs(now, fs_result(kind, n, &text)),
            Op::Listen { kind, port } => {
                let a = SocketAddr::new(local.ip(), port);
                let r = match kind % 4 {
                    0 => Err("bind failed\r\n500 injected".to_string()),
                    1 => Ok(vec![]),
                    2 => Ok(vec![a, a]),
                    _ => Ok(vec![a]),
                };
                s.handle_listening(now, r);
            }
            Op::Progress {
                bytes,
                ranges,
                stripes,
            } => {
                let ranges = ranges
                    .into_iter()
                    .map(|(a, l)| u64::from(a)..u64::from(a) + u64::from(l))
                    .collect::<RangeSet>();
                // A striped frontend's per-stripe bytes (one 112 marker each).
                let stripes = stripes.into_iter().map(u64::from).collect();
                s.handle_progress(
                    now,
                    TransferProgress {
                        bytes,
                        ranges,
                        stripes,
                    },
                );
            }
            Op::Done {
                current,
                kind,
                code,
            } => {
                let id = if current {
                    transfer.unwrap_or(0)
                } else {
                    u64::from(kind)
                };
                let r = match kind % 3 {
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
            Op::Wait { ms } => {
                now += Duration::from_millis(u64::from(ms) * 8);
                if s.poll_timeout().is_some_and(|t| t <= now) {
                    s.handle_timeout(now);
                }
            }
            Op::SbufNotice { id, size } => {
                let _ = s.send_sbuf_notice(now, id, size);
            }
        }
        while let Some(b) = s.poll_transmit() {
            out.extend_from_slice(&b);
        }
        while let Some(a) = s.poll_action() {
            if let Action::CheckLogin { user, password } = &a {
                // The fake credential store: user `u`, password `p`.
                let ok = user == "u" && password.0 == "p";
                let verdict = if ok {
                    LoginVerdict::Granted { read_only: false }
                } else {
                    LoginVerdict::Denied
                };
                s.handle_login(now, verdict);
            }
            if let Action::Transfer(p) = a {
                assert!(p.parallelism >= 1);
                transfer = Some(p.id);
            }
        }
    }
    check_replies(&out);
});
