//! Third-party batch tests (`relay.rs`): two scripted sessions (source, destination) refereed by a [`Relay`], as
//! `drsftp-io`'s driver does it. The order of commands on both (the destination's PASV before the source's PORT,
//! the first STOR alone), no RETR before the destination's 1xx to that file's STOR, the destination's window, a STOR
//! refused mid-batch failing alone, a first STOR released blind for a server that answers only once the connection
//! is in, and what breaks the batch (a refusal after the RETR was released, a RETR refused).

use std::time::Duration;

use super::script_tests::{Scripted, DRSFTP_FEAT, GLOBUS_FEAT};
use super::*;

const BLIND: Duration = Duration::from_millis(300);

fn path(i: usize) -> String {
    format!("/d/f {i}")
}

fn dst_cmds(i: usize) -> Vec<String> {
    vec![
        format!("ALLO {}", 100 + i),
        format!("STOR {}", path(i)),
        format!("MFMT 20200101000000 {}", path(i)),
        format!("CKSM CRC32C 0 -1 {}", path(i)),
    ]
}

fn src_cmds(i: usize) -> Vec<String> {
    vec![
        format!("RETR {}", path(i)),
        format!("CKSM CRC32C 0 -1 {}", path(i)),
    ]
}

/// A source and a destination session and the relay between them, pumped as the driver does.
struct Pair {
    src: Scripted,
    dst: Scripted,
    relay: Relay,
    n: usize,
    results: Vec<(usize, RelayResult)>,
    /// Every line the source sent, in order, with how many STORs the destination had accepted (1xx) by then.
    src_log: Vec<(String, usize)>,
    accepted: usize,
}

impl Pair {
    /// Logged-in sessions; the destination starts its batch of `n` files (window `window`, PASV with `peer`).
    fn start(src_feat: &str, dst_feat: &str, n: usize, window: usize, peer: bool) -> Pair {
        let mut dst = Scripted::login(dst_feat);
        let src = Scripted::login(src_feat);
        dst.start(Op::UploadBatch(UploadBatchSpec {
            files: (0..n)
                .map(|i| UploadItem {
                    path: path(i),
                    size: 100 + i as u64,
                    mtime: Some("20200101000000".into()),
                })
                .collect(),
            checksum: Some("CRC32C".into()),
            pasv: true,
            window,
            peer: peer.then(|| "127.0.0.2".into()),
            first_alone: true,
        }));
        Pair {
            src,
            dst,
            relay: Relay::new(&vec![true; n], true, BLIND),
            n,
            results: vec![],
            src_log: vec![],
            accepted: 0,
        }
    }

    /// Moves events between the sessions and the relay until nothing changes.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            let now = self.dst.now;
            for ev in self.dst.events() {
                moved = true;
                if let Event::Connect { addr, .. } = ev {
                    // The destination's passive address goes to the source as PORT.
                    self.src.start(Op::Batch(BatchSpec {
                        paths: (0..self.n).map(path).collect(),
                        held: vec![],
                        checksum: Some("CRC32C".into()),
                        port: Some(addr),
                        window: 16,
                        gated: true,
                    }));
                    self.dst.s.handle_data_ready(now);
                    self.relay.channel_ready(now);
                    continue;
                }
                if matches!(ev, Event::BatchStarted(_)) {
                    self.accepted += 1;
                }
                self.relay.handle_dst(now, &ev);
            }
            for ev in self.src.events() {
                moved = true;
                self.relay.handle_src(now, &ev);
            }
            while let Some(go) = self.relay.poll_decision() {
                moved = true;
                assert!(self.src.s.decide_batch_file(now, go).is_some());
            }
            while let Some(r) = self.relay.poll_result() {
                self.results.push(r);
            }
            for l in self.src.sent() {
                self.src_log.push((l, self.accepted));
            }
            if !moved {
                return;
            }
        }
    }

    fn dst_reply(&mut self, text: &str) {
        self.dst.reply(text);
        self.pump();
    }

    fn src_reply(&mut self, text: &str) {
        self.src.reply(text);
        self.pump();
    }

    /// What the source sent since the last call.
    fn src_sent(&mut self) -> Vec<String> {
        self.src_log.drain(..).map(|(l, _)| l).collect()
    }
}

#[test]
fn the_source_reads_a_file_only_after_the_destination_accepted_it() {
    let mut p = Pair::start(DRSFTP_FEAT, DRSFTP_FEAT, 4, 2, true);
    assert_eq!(
        p.dst.sent(),
        ["TYPE I", "MODE E", "PEER 127.0.0.2", "PASV"],
        "the destination's channel first"
    );
    p.dst_reply("200 ok\n200 ok\n200 PEER ok\n227 Entering Passive Mode (127,0,0,1,235,41)\n");
    assert_eq!(
        p.src_sent(),
        [
            "TYPE I",
            "MODE E",
            "OPTS RETR Parallelism=1,1,1;",
            "PORT 127,0,0,1,235,41"
        ],
        "the source is told where to send, and reads nothing yet"
    );
    assert_eq!(p.dst.sent(), dst_cmds(0), "the first STOR goes alone");
    p.src_reply("200 ok\n200 ok\n200 ok\n200 PORT ok\n");
    assert!(p.src_sent().is_empty());
    p.dst_reply("200 ALLO ok\n125 Beginning MODE E transfer.\n");
    assert_eq!(p.src_sent(), src_cmds(0), "file 0 accepted: its RETR goes");
    assert_eq!(p.dst.sent(), dst_cmds(1), "the window: two STORs in flight");
    p.src_reply("125 go\n226 done\n213 abcd\n");
    assert!(p.results.is_empty(), "the destination has not finished");
    // File 0 arrives; the destination answers it and accepts file 1 in the same read.
    p.dst_reply("226 ok\n213 MFMT ok\n213 ABCD\n200 ALLO ok\n125 go\n");
    assert_eq!(p.results[0].0, 0);
    assert!(
        matches!(&p.results[0].1, RelayResult::Copied { checksum: Some(c), unverified: None, mtime: Some(m) }
            if c == "abcd" && m.code == 213),
        "{:?}",
        p.results
    );
    assert_eq!(p.src_sent(), src_cmds(1));
    assert_eq!(p.dst.sent(), dst_cmds(2));
    for i in 1..4 {
        p.src_reply(&format!("125 go\n226 done\n213 {i:04x}\n"));
        let next_ok = if i < 3 { "200 ALLO ok\n125 go\n" } else { "" };
        p.dst_reply(&format!("226 ok\n213 ok\n213 {i:04x}\n{next_ok}"));
    }
    assert_eq!(p.results.len(), 4, "{:?}", p.results);
    assert!(p.results.iter().all(|(_, r)| matches!(
        r,
        RelayResult::Copied {
            unverified: None,
            ..
        }
    )));
    assert!(p.relay.is_done() && p.relay.broken().is_none());
    assert!(!p.src.s.is_busy() && !p.dst.s.is_busy());
}

#[test]
fn no_retr_before_its_store_is_accepted_and_the_window_holds() {
    // A longer batch, answered in bursts: every RETR k must follow the destination's (k+1)-th 1xx.
    let mut p = Pair::start(DRSFTP_FEAT, DRSFTP_FEAT, 40, 8, false);
    assert_eq!(p.dst.sent(), ["TYPE I", "MODE E", "PASV"]);
    p.dst_reply("200 ok\n200 ok\n227 Entering Passive Mode (127,0,0,1,235,41)\n");
    p.src_reply("200 ok\n200 ok\n200 ok\n200 ok\n");
    let mut stors_out = 0usize;
    let mut answered = 0usize;
    let mut log = vec![];
    for i in 0..40 {
        let sent = p.dst.sent();
        stors_out += sent.iter().filter(|l| l.starts_with("STOR")).count();
        assert!(
            stors_out - answered <= 8,
            "at most the window unanswered: {stors_out} out, {answered} answered"
        );
        p.dst_reply("200 ALLO ok\n125 go\n");
        p.src_reply("125 go\n226 done\n213 01\n");
        p.dst_reply("226 ok\n213 ok\n213 01\n");
        answered = i + 1;
        log.append(&mut p.src_log);
    }
    for (line, accepted) in &log {
        if let Some(rest) = line.strip_prefix("RETR /d/f ") {
            let k: usize = rest.parse().unwrap();
            assert!(
                *accepted > k,
                "RETR {k} went out after only {accepted} accepted STORs"
            );
        }
    }
    assert_eq!(
        log.iter().filter(|(l, _)| l.starts_with("RETR")).count(),
        40
    );
    assert_eq!(p.results.len(), 40);
    assert!(p.relay.is_done() && p.relay.broken().is_none());
}

#[test]
fn a_store_refused_mid_batch_fails_alone_and_its_file_is_never_read() {
    let mut p = Pair::start(DRSFTP_FEAT, DRSFTP_FEAT, 3, 4, false);
    p.dst.sent();
    p.dst_reply("200 ok\n200 ok\n227 Entering Passive Mode (127,0,0,1,235,41)\n");
    p.src_reply("200 ok\n200 ok\n200 ok\n200 ok\n");
    p.dst_reply("200 ALLO ok\n125 go\n");
    p.src_reply("125 go\n226 done\n213 01\n");
    // File 0 lands; file 1's STOR is refused outright (no 1xx), its MFMT and CKSM too; file 2 is accepted.
    p.dst_reply(
        "226 ok\n213 ok\n213 01\n200 ALLO ok\n553 /d/f 1: Permission denied.\n550 no\n550 no\n200 ALLO ok\n125 go\n",
    );
    assert!(
        p.results
            .iter()
            .any(|(i, r)| *i == 1 && matches!(r, RelayResult::Refused(x) if x.code == 553)),
        "{:?}",
        p.results
    );
    let sent = p.src_sent();
    assert!(sent.iter().all(|l| !l.contains("f 1")), "{sent:?}");
    let retrs: Vec<&String> = sent.iter().filter(|l| l.starts_with("RETR")).collect();
    assert_eq!(retrs, ["RETR /d/f 0", "RETR /d/f 2"]);
    p.src_reply("125 go\n226 done\n213 02\n");
    p.dst_reply("226 ok\n213 ok\n213 02\n");
    assert!(p.relay.is_done() && p.relay.broken().is_none());
    assert_eq!(p.results.len(), 3);
    assert!(
        !p.src.s.is_busy(),
        "the source's batch ended without file 1"
    );
}

#[test]
fn a_first_store_answered_only_once_the_connection_is_in_goes_blind() {
    // globus-gridftp-server answers a STOR on a fresh passive listener only once the data connection is in.
    let mut p = Pair::start(GLOBUS_FEAT, GLOBUS_FEAT, 3, 8, false);
    p.dst.sent();
    p.dst_reply("200 ok\n200 ok\n227 Entering Passive Mode (127,0,0,1,235,41)\n");
    p.src_reply("200 ok\n200 ok\n200 ok\n200 ok\n");
    p.src_sent();
    assert_eq!(p.dst.sent(), dst_cmds(0));
    p.dst_reply("200 ALLO ok\n");
    assert!(p.src_sent().is_empty(), "not yet");
    let due = p.relay.poll_timeout().expect("a blind release is armed");
    assert_eq!(due, p.dst.now + BLIND);
    p.dst.now = due;
    p.src.now = due;
    p.relay.handle_timeout(due);
    p.pump();
    assert_eq!(p.src_sent(), src_cmds(0), "released without the 1xx");
    assert!(
        p.dst.sent().is_empty(),
        "no second STOR behind an unanswered one"
    );
    p.src_reply("150 go\n226 done\n213 01\n");
    p.dst_reply("150 Beginning transfer.\n");
    assert_eq!(
        p.dst.sent(),
        [dst_cmds(1), dst_cmds(2)].concat(),
        "proven: pipelined"
    );
    p.dst_reply("226 ok\n213 ok\n213 01\n200 ALLO ok\n125 reusing existing data connection\n");
    assert_eq!(p.src_sent(), src_cmds(1));
    assert!(
        p.relay.poll_timeout().is_none(),
        "nothing blind once proven"
    );
}

#[test]
fn a_blind_file_refused_breaks_the_batch() {
    let mut p = Pair::start(GLOBUS_FEAT, GLOBUS_FEAT, 3, 8, false);
    p.dst.sent();
    p.dst_reply("200 ok\n200 ok\n227 Entering Passive Mode (127,0,0,1,235,41)\n");
    p.src_reply("200 ok\n200 ok\n200 ok\n200 ok\n");
    p.src_sent();
    p.dst_reply("200 ALLO ok\n");
    p.dst.now += BLIND;
    p.relay.handle_timeout(p.dst.now);
    p.pump();
    assert_eq!(p.src_sent(), src_cmds(0));
    p.dst_reply("451 could not open\n");
    let b = p.relay.broken().expect("broken");
    assert_eq!(b.index, Some(0));
    assert!(p.relay.is_done());
    assert!(matches!(&p.results[..], [(0, RelayResult::Refused(r))] if r.code == 451));
    assert!(p.relay.poll_decision().is_none(), "nothing more is decided");
}

#[test]
fn a_retr_refused_after_the_store_was_accepted_breaks_the_batch() {
    let mut p = Pair::start(DRSFTP_FEAT, DRSFTP_FEAT, 2, 8, false);
    p.dst.sent();
    p.dst_reply("200 ok\n200 ok\n227 Entering Passive Mode (127,0,0,1,235,41)\n");
    p.src_reply("200 ok\n200 ok\n200 ok\n200 ok\n");
    p.dst_reply("200 ALLO ok\n125 go\n");
    p.src_reply("550 /d/f 0: No such file.\n");
    let b = p.relay.broken().expect("broken");
    assert_eq!(b.index, Some(0));
    assert!(b.why.contains("550"), "{b:?}");
    assert!(p.results.is_empty(), "file 0 is left to the one-file path");
}

#[test]
fn checksums_that_differ_are_a_mismatch() {
    let mut p = Pair::start(DRSFTP_FEAT, DRSFTP_FEAT, 1, 8, false);
    p.dst.sent();
    p.dst_reply("200 ok\n200 ok\n227 Entering Passive Mode (127,0,0,1,235,41)\n");
    p.src_reply("200 ok\n200 ok\n200 ok\n200 ok\n");
    p.dst_reply("200 ALLO ok\n125 go\n");
    p.src_reply("125 go\n226 done\n213 aaaa\n");
    p.dst_reply("226 ok\n213 ok\n213 bbbb\n");
    assert_eq!(
        p.results,
        vec![(
            0,
            RelayResult::Mismatch {
                source: "aaaa".into(),
                destination: "bbbb".into()
            }
        )]
    );
    assert!(p.relay.is_done() && p.relay.broken().is_none());
}
