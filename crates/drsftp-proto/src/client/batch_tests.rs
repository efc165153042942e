//! Batch tests (`batch.rs`): RETR/CKSM pairs go out ahead of the replies up to the window, a refused RETR fails
//! only its file, no reply deadline runs while a file's data moves, and the second batch reuses the data channel
//! (no PORT), against a Globus-like and a drsftp-like scripted server.

use std::time::Duration;

use super::script_tests::{Scripted, DRSFTP_FEAT, GLOBUS_FEAT};
use super::*;

fn spec(n: usize, window: usize, port: bool) -> BatchSpec {
    BatchSpec {
        paths: (0..n).map(|i| format!("/d/f{i}")).collect(),
        held: vec![],
        checksum: Some("CRC32C".into()),
        port: port.then(|| "127.0.0.1:60201".parse().unwrap()),
        window,
        gated: false,
    }
}

fn r226() -> reply::Reply {
    let mut rd = reply::ReplyReader::new();
    rd.push(b"226 Transfer complete.\r\n");
    rd.next_reply().unwrap().unwrap()
}

#[test]
fn batch_pipelines_retr_and_cksm_up_to_the_window() {
    let mut h = Scripted::login(GLOBUS_FEAT);
    h.start(Op::Batch(spec(3, 2, true)));
    assert_eq!(
        h.sent(),
        [
            "TYPE I",
            "MODE E",
            "OPTS RETR Parallelism=1,1,1;",
            "PORT 127,0,0,1,235,41",
            "RETR /d/f0",
            "CKSM CRC32C 0 -1 /d/f0",
            "RETR /d/f1",
            "CKSM CRC32C 0 -1 /d/f1",
        ],
        "set-up and two files in one round, even to a Globus server"
    );
    h.reply("200 ok\n200 ok\n200 ok\n200 ok\n150 Opening\n");
    assert_eq!(h.events(), vec![Event::BatchStarted(0)]);
    assert_eq!(h.s.poll_timeout(), None, "no deadline while file 0 moves");
    h.now += Duration::from_secs(3600);
    h.s.handle_timeout(h.now);
    assert!(!h.s.is_dead());
    h.reply("226 Transfer complete.\n");
    assert_eq!(
        h.events(),
        vec![Event::BatchRetr {
            index: 0,
            reply: r226()
        }]
    );
    assert_eq!(
        h.sent(),
        ["RETR /d/f2", "CKSM CRC32C 0 -1 /d/f2"],
        "the window moved on"
    );
    h.reply("213 0d263b46\n550 /d/f1: No such file.\n550 /d/f1: No such file.\n");
    let ev = h.events();
    assert_eq!(
        ev[0],
        Event::BatchChecksum {
            index: 0,
            result: Ok("0d263b46".into())
        }
    );
    assert!(
        matches!(&ev[1], Event::BatchRetr { index: 1, reply } if reply.code == 550),
        "{ev:?}"
    );
    assert!(
        matches!(&ev[2], Event::BatchChecksum { index: 1, result: Err(r) } if r.code == 550),
        "{ev:?}"
    );
    assert_eq!(ev.len(), 3, "a missing file does not end the batch");
    h.reply("150 Opening\n226 Done\n213 ABCD\n");
    let ev = h.events();
    assert_eq!(ev[0], Event::BatchStarted(2));
    assert!(matches!(&ev[1], Event::BatchRetr { index: 2, reply } if reply.code == 226));
    assert_eq!(
        ev[2],
        Event::BatchChecksum {
            index: 2,
            result: Ok("abcd".into())
        }
    );
    assert_eq!(ev[3], Event::Done(Outcome::Batch));
    assert!(!h.s.is_busy());
}

#[test]
fn a_second_batch_reuses_the_data_channel() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.start(Op::Batch(spec(1, 8, true)));
    assert_eq!(h.sent().len(), 6);
    h.reply("200 ok\n200 ok\n200 ok\n200 ok\n150 go\n226 done\n213 01\n");
    assert_eq!(h.events().last(), Some(&Event::Done(Outcome::Batch)));
    h.start(Op::Batch(spec(2, 8, false)));
    assert_eq!(
        h.sent(),
        [
            "RETR /d/f0",
            "CKSM CRC32C 0 -1 /d/f0",
            "RETR /d/f1",
            "CKSM CRC32C 0 -1 /d/f1"
        ],
        "TYPE and MODE are known, no PORT: the server's cached connection carries it"
    );
}

#[test]
fn the_window_is_capped() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.start(Op::Batch(spec(500, 10_000, false)));
    let sent = h.sent();
    let retrs = sent.iter().filter(|l| l.starts_with("RETR")).count();
    assert_eq!(retrs, batch::MAX_WINDOW);
    assert!(sent.len() < 256, "below what drsftp serve queues");
}

#[test]
fn a_held_file_gets_its_rest_ranges_right_before_its_retr() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    let mut s = spec(3, 8, false);
    s.held = vec![
        crate::ranges::RangeSet::new(),
        crate::ranges::RangeSet::parse("0-1000,2000-3000").unwrap(),
    ];
    h.start(Op::Batch(s));
    assert_eq!(
        h.sent(),
        [
            "TYPE I",
            "MODE E",
            "RETR /d/f0",
            "CKSM CRC32C 0 -1 /d/f0",
            "REST 0-1000,2000-3000",
            "RETR /d/f1",
            "CKSM CRC32C 0 -1 /d/f1",
            "RETR /d/f2",
            "CKSM CRC32C 0 -1 /d/f2",
        ],
        "only file 1 holds bytes; its REST is pipelined with the rest"
    );
    // A server that refuses the ranges sends the whole file: a notice, and the batch goes on.
    h.reply("200 ok\n200 ok\n150 go\n226 done\n213 01\n501 no ranges\n150 go\n");
    let ev = h.events();
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::Notice(n) if n.contains("REST 0-1000,2000-3000"))),
        "{ev:?}"
    );
    assert_eq!(ev.last(), Some(&Event::BatchStarted(1)), "{ev:?}");
    assert!(!h.s.is_dead());
}

#[test]
fn a_gated_batch_sends_no_rest() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    let mut s = spec(1, 8, false);
    s.gated = true;
    s.held = vec![crate::ranges::RangeSet::parse("0-1000").unwrap()];
    h.start(Op::Batch(s));
    assert!(h.sent().iter().all(|l| !l.starts_with("REST")));
}
