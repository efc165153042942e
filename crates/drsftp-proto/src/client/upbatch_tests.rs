//! Upload batch tests (`upbatch.rs`): the order of commands (set-up, PASV answered and connected before any
//! file, then ALLO/STOR/MFMT/CKSM per file), a file may send data only on its own STOR's 1xx, a STOR refused
//! mid-batch fails only that file, the window bounds the STORs in flight, and a second batch reuses the channel.

use std::time::Duration;

use super::script_tests::{Scripted, DRSFTP_FEAT, GLOBUS_FEAT};
use super::*;

fn spec(n: usize, window: usize, pasv: bool) -> UploadBatchSpec {
    UploadBatchSpec {
        files: (0..n)
            .map(|i| UploadItem {
                path: format!("/d/f {i}"),
                size: 100 + i as u64,
                mtime: Some("20200101000000".into()),
            })
            .collect(),
        checksum: Some("CRC32C".into()),
        pasv,
        window,
        peer: None,
        first_alone: false,
    }
}

fn file_cmds(i: usize) -> Vec<String> {
    vec![
        format!("ALLO {}", 100 + i),
        format!("STOR /d/f {i}"),
        format!("MFMT 20200101000000 /d/f {i}"),
        format!("CKSM CRC32C 0 -1 /d/f {i}"),
    ]
}

#[test]
fn files_wait_for_the_data_channel_then_pipeline_up_to_the_window() {
    let mut h = Scripted::login(GLOBUS_FEAT);
    h.start(Op::UploadBatch(spec(3, 2, true)));
    assert_eq!(
        h.sent(),
        ["TYPE I", "MODE E", "PASV"],
        "no STOR before the data channel is known"
    );
    h.reply("200 ok\n200 ok\n227 Entering Passive Mode (127,0,0,1,235,41)\n");
    assert_eq!(
        h.events(),
        vec![Event::Connect {
            addr: "127.0.0.1:60201".parse().unwrap(),
            streams: 1
        }]
    );
    assert!(h.sent().is_empty(), "nothing while the driver connects");
    h.s.handle_data_ready(h.now);
    let mut want = file_cmds(0);
    want.extend(file_cmds(1));
    assert_eq!(h.sent(), want, "two files in one round: the window");
    // ALLO's answer says nothing about the data: no event that lets file 0's bytes go.
    h.reply("200 ALLO ok\n");
    assert!(h.events().is_empty());
    h.reply("150 Opening\n");
    assert_eq!(h.events(), vec![Event::BatchStarted(0)]);
    assert_eq!(h.s.poll_timeout(), None, "no deadline while file 0 moves");
    h.now += Duration::from_secs(3600);
    h.s.handle_timeout(h.now);
    assert!(!h.s.is_dead());
    h.reply("226 Transfer complete.\n");
    let ev = h.events();
    assert!(
        matches!(&ev[..], [Event::BatchStored { index: 0, reply }] if reply.code == 226),
        "{ev:?}"
    );
    assert_eq!(h.sent(), file_cmds(2), "the window moved on");
    h.reply("213 MFMT ok\n213 1a2b3c4d\n");
    let ev = h.events();
    assert!(matches!(&ev[0], Event::BatchMtime { index: 0, reply } if reply.code == 213));
    assert_eq!(
        ev[1],
        Event::BatchChecksum {
            index: 0,
            result: Ok("1a2b3c4d".into())
        }
    );
    // File 1 refused outright: never a BatchStarted(1), so no byte of any file goes out as file 1's.
    h.reply("200 ALLO ok\n553 /d/f 1: Permission denied.\n550 no file\n550 no file\n");
    let ev = h.events();
    assert!(
        matches!(&ev[0], Event::BatchStored { index: 1, reply } if reply.code == 553),
        "{ev:?}"
    );
    assert!(!ev.contains(&Event::BatchStarted(1)));
    assert_eq!(ev.len(), 3, "a refused file does not end the batch: {ev:?}");
    h.reply("200 ALLO ok\n150 Opening\n");
    assert_eq!(h.events(), vec![Event::BatchStarted(2)]);
    h.reply("226 ok\n213 ok\n213 ABCD\n");
    let ev = h.events();
    assert!(matches!(&ev[0], Event::BatchStored { index: 2, reply } if reply.code == 226));
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
fn a_started_file_is_told_by_its_own_reply_only() {
    // A 1xx that arrives while the head command is ALLO (a server answering out of turn) starts nothing.
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.start(Op::UploadBatch(spec(1, 4, false)));
    assert_eq!(h.sent()[..2], ["TYPE I", "MODE E"]);
    h.reply("200 ok\n200 ok\n150 early\n");
    assert!(
        h.events().is_empty(),
        "a 150 answering ALLO's slot is not STOR's"
    );
    h.reply("200 ALLO ok\n150 now\n");
    assert_eq!(h.events(), vec![Event::BatchStarted(0)]);
}

#[test]
fn a_second_upload_batch_reuses_the_channel() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.start(Op::UploadBatch(spec(1, 8, true)));
    assert_eq!(h.sent(), ["TYPE I", "MODE E", "PASV"]);
    h.reply("200 ok\n200 ok\n227 Entering Passive Mode (127,0,0,1,235,41)\n");
    let _ = h.events();
    h.s.handle_data_ready(h.now);
    assert_eq!(h.sent(), file_cmds(0));
    h.reply("200 ok\n150 go\n226 done\n213 ok\n213 01\n");
    assert_eq!(h.events().last(), Some(&Event::Done(Outcome::Batch)));
    h.start(Op::UploadBatch(spec(2, 8, false)));
    let mut want = file_cmds(0);
    want.extend(file_cmds(1));
    assert_eq!(
        h.sent(),
        want,
        "TYPE and MODE are known, no PASV: the kept connection carries it"
    );
}

#[test]
fn the_upload_window_is_capped() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    let mut s = spec(500, 10_000, false);
    s.files.iter_mut().for_each(|f| f.mtime = None);
    h.start(Op::UploadBatch(s));
    let sent = h.sent();
    let stors = sent.iter().filter(|l| l.starts_with("STOR")).count();
    assert_eq!(stors, upbatch::MAX_UPLOAD_WINDOW);
    assert!(sent.len() < 256 / 2, "well below what drsftp serve queues");
    assert!(
        sent.last().unwrap().starts_with("CKSM"),
        "an ALLO never goes out without its STOR: {:?}",
        sent.last()
    );
}
