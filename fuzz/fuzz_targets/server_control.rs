//! Fuzz target: a whole server control session driven by fuzzer-chosen input — raw bytes, command lines built
//! from the verbs and hostile arguments, and arbitrary (even nonsensical) driver answers and clock jumps.
//! Checks: no panic, the driver's invariants, and everything the session writes is well-formed FTP replies (CRLF
//! lines, codes 100-599, multi-line blocks closed). The session is driven by `drsftp_proto::server::drive`, the
//! same driver the property test uses; this file only turns the fuzzer's bytes into its steps.
#![no_main]

use std::time::Duration;

use arbitrary::Arbitrary;
use drsftp_proto::server::drive::{self, Step, ARGS, VERBS};
use drsftp_proto::server::ServerConfig;
use libfuzzer_sys::fuzz_target;

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

impl Op {
    fn step(self) -> Step {
        let verb = |v: u8| VERBS[usize::from(v) % VERBS.len()];
        match self {
            Op::Bytes(b) => Step::Bytes(b),
            Op::Line { verb: v, arg } => Step::Line(format!(
                "{} {}",
                verb(v),
                ARGS[usize::from(arg) % ARGS.len()]
            )),
            Op::RawLine { verb: v, arg } => Step::Line(format!("{} {arg}", verb(v))),
            Op::Fs { kind, n, text } => Step::Fs(kind, n, text),
            Op::Listen { kind, port } => Step::Listen(kind, port),
            Op::Progress {
                bytes,
                ranges,
                stripes,
            } => Step::Progress(
                bytes,
                ranges
                    .into_iter()
                    .map(|(a, l)| (u64::from(a), u64::from(l)))
                    .collect(),
                // A striped frontend's per-stripe bytes (one 112 marker each).
                stripes.into_iter().map(u64::from).collect(),
            ),
            Op::Done {
                current,
                kind,
                code,
            } => Step::Done(current, kind, code),
            Op::Wait { ms } => Step::Wait(Duration::from_millis(u64::from(ms) * 8)),
            Op::SbufNotice { id, size } => Step::SbufNotice(id, size),
        }
    }
}

fuzz_target!(|input: Input| {
    let cfg = ServerConfig {
        anonymous: input.anonymous,
        max_line: 16 + usize::from(input.max_line) * 4,
        marker_interval: Duration::from_secs(1),
        ..ServerConfig::default()
    };
    let login = [Step::Line("USER u".into()), Step::Line("PASS p".into())];
    let steps = input
        .login
        .then_some(login)
        .into_iter()
        .flatten()
        .chain(input.ops.into_iter().take(200).map(Op::step));
    if let Err(e) = drive::run(cfg, steps) {
        panic!("{e}");
    }
});
