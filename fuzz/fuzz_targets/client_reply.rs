//! Fuzz target: the client's reply parser and the PASV/EPSV/marker parsers a hostile server reaches. Checks: no
//! panic, a parsed reply has a code in 100-599 and at least one line, and a reader that failed stays failed.
#![no_main]

use drsftp_proto::client::{parse_epsv, parse_pasv, ReplyReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte splits the input into the chunks the reader receives, as TCP would.
    let (step, bytes) = match data.split_first() {
        Some((s, rest)) => (usize::from(*s).max(1), rest),
        None => return,
    };
    let mut r = ReplyReader::new();
    let mut failed = false;
    for chunk in bytes.chunks(step) {
        r.push(chunk);
        loop {
            match r.next_reply() {
                Ok(Some(reply)) => {
                    assert!(!failed, "a failed reader produced a reply");
                    assert!((100..=599).contains(&reply.code));
                    assert!(!reply.lines.is_empty());
                    let _ = parse_pasv(&reply);
                    let _ = parse_epsv(&reply, "127.0.0.1".parse().unwrap());
                }
                Ok(None) => break,
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
    }
});
