//! Property tests: random bytes, random command lines and random (even nonsensical) driver answers never panic
//! the session, and everything it writes is well-formed FTP replies: `ddd text` or a `ddd-` … `ddd ` block whose
//! inner lines start with a space, every line ending in CRLF, no stray CR or LF. The session is driven by
//! [`drive::run`], the same driver the cargo-fuzz target uses; this file only generates its steps.

use std::time::Duration;

use proptest::prelude::*;

use super::drive::{self, Step, ARGS, TRANSFER_LINES, VERBS};
use super::*;

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => (proptest::collection::vec(any::<u8>(), 0..80), any::<bool>()).prop_map(|(mut b, nl)| {
            if nl {
                b.push(b'\n');
            }
            Step::Bytes(b)
        }),
        3 => (0..TRANSFER_LINES.len()).prop_map(|i| Step::Line(TRANSFER_LINES[i].to_string())),
        6 => (0..VERBS.len(), 0..ARGS.len(), ".{0,12}", any::<bool>()).prop_map(|(v, a, junk, use_junk)| {
            let arg = if use_junk { junk } else { ARGS[a].to_string() };
            Step::Line(format!("{} {arg}", VERBS[v]))
        }),
        3 => (any::<u8>(), any::<u64>(), "[0-9a-fA-F]{0,8}|.{0,6}").prop_map(|(k, n, s)| Step::Fs(k, n, s)),
        1 => (any::<u8>(), any::<u16>()).prop_map(|(k, p)| Step::Listen(k, p)),
        2 => (any::<u64>(), proptest::collection::vec((prop_oneof![0u64..1 << 24, any::<u64>()], 0u64..1 << 20), 0..6))
            .prop_map(|(b, r)| Step::Progress(b, r, vec![])),
        3 => (any::<bool>(), any::<u8>(), any::<u16>()).prop_map(|(cur, k, c)| Step::Done(cur, k, c)),
        2 => (0u64..20_000).prop_map(|ms| Step::Wait(Duration::from_millis(ms))),
        1 => prop_oneof![Just(f64::NAN), Just(-1.0), Just(1.7e9), any::<f64>()].prop_map(Step::Epoch),
        1 => (any::<u64>(), any::<u64>()).prop_map(|(i, n)| Step::SbufNotice(i, n)),
    ]
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
        ops in proptest::collection::vec(step(), 0..60),
    ) {
        let mut all = Vec::new();
        if login {
            all.push(Step::Line("USER u".into()));
            all.push(Step::Line("PASS p".into()));
            all.push(Step::Line("PASV".into()));
            all.push(Step::Listen(3, 40000));
        }
        all.extend(ops);
        drive::run(cfg, all).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn random_bytes_never_panic(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..512), 0..8)) {
        let ops: Vec<Step> = std::iter::once(Step::Line("USER anonymous".into()))
            .chain(std::iter::once(Step::Line("PASS x".into())))
            .chain(chunks.into_iter().map(Step::Bytes))
            .collect();
        drive::run(ServerConfig::default(), ops).map_err(TestCaseError::fail)?;
    }
}
