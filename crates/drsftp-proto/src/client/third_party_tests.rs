//! What third-party copies ask of the client session: the checks pipelined behind a transfer command
//! (`Op::Command` with STOR/RETR: SIZE and CKSM go out with the command to a drsftp server, the transfer's own
//! `226` is an event of its own, their replies complete the report; refusals, aborts and other servers keep the
//! old order), and the set-up commands sent as one batch (`Op::Commands`).

use super::script_tests::{Scripted, DRSFTP_FEAT, GLOBUS_FEAT};
use super::*;

fn reply_code(ev: &Event) -> Option<u16> {
    match ev {
        Event::TransferReplied(r) => Some(r.code),
        _ => None,
    }
}

#[test]
fn stor_carries_size_and_cksm_and_says_when_the_data_has_moved() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.s.set_trailing_size();
    h.s.set_trailing_checksum("CRC32C");
    h.start(Op::Command("STOR /in/f".into()));
    assert_eq!(
        h.sent(),
        ["STOR /in/f", "SIZE /in/f", "CKSM CRC32C 0 -1 /in/f"],
        "one write: the destination answers both right after its 226"
    );
    h.reply("150 Opening.\n");
    assert!(matches!(&h.events()[..], [Event::TransferStarted(_)]));
    assert_eq!(
        h.s.poll_timeout(),
        None,
        "no reply deadline while data moves"
    );
    h.reply("226 Transfer complete.\n");
    let ev = h.events();
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(reply_code(&ev[0]), Some(226), "the data phase ends here");
    assert!(h.s.is_busy() && h.s.poll_timeout().is_some(), "SIZE is due");
    h.reply("213 1048576\n");
    assert_eq!(h.events(), vec![], "the CKSM is still due");
    h.reply("213 0A1B2C3D\n");
    let rep = h.report();
    assert_eq!(rep.final_reply.map(|r| r.code), Some(226));
    assert_eq!(rep.size, Some(Box::new(Ok(1 << 20))));
    assert_eq!(rep.checksum, Some(Box::new(Ok("0a1b2c3d".into()))));
    assert!(!h.s.is_busy());
    // Used once: the next transfer command goes alone.
    h.start(Op::Command("STOR /in/g".into()));
    assert_eq!(h.sent(), ["STOR /in/g"]);
}

#[test]
fn retr_carries_only_the_cksm_asked_for() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.s.set_trailing_checksum("CRC32C");
    h.start(Op::Command("RETR /data/f".into()));
    assert_eq!(h.sent(), ["RETR /data/f", "CKSM CRC32C 0 -1 /data/f"]);
    // The source computes it while the destination still receives: its answer may come in the same read.
    h.reply("150 Opening.\n226 Transfer complete.\n213 0a1b2c3d\n");
    let ev = h.events();
    assert!(ev.iter().any(|e| reply_code(e) == Some(226)), "{ev:?}");
    match ev.last() {
        Some(Event::Done(Outcome::Transferred(r))) => {
            assert_eq!(r.checksum, Some(Box::new(Ok("0a1b2c3d".into()))));
            assert_eq!(r.size, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn refused_checks_are_reported_not_fatal() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.s.set_trailing_size();
    h.s.set_trailing_checksum("CRC32C");
    h.start(Op::Command("STOR /in/f".into()));
    h.sent();
    h.reply("150 Opening.\n226 Done.\n550 Gone.\n451 Mover failed.\n");
    let rep = h.report();
    assert!(matches!(rep.size.as_deref(), Some(Err(r)) if r.code == 550));
    assert!(matches!(rep.checksum.as_deref(), Some(Err(r)) if r.code == 451));
}

#[test]
fn a_refused_stor_swallows_the_checks_behind_it() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.s.set_trailing_size();
    h.s.set_trailing_checksum("CRC32C");
    h.start(Op::Command("STOR /in/f".into()));
    h.sent();
    h.reply("553 Not allowed.\n");
    assert!(
        matches!(&h.events()[..], [Event::Failed(ClientError::Refused { reply, .. })] if reply.code == 553)
    );
    // The checks' replies (refusals too, the file is not there) are not the next command's.
    h.start(Op::Command("DELE /in/f".into()));
    assert_eq!(h.sent(), ["DELE /in/f"]);
    h.reply("550 No such file.\n550 No such file.\n");
    assert_eq!(h.events(), vec![], "swallowed");
    h.reply("250 Deleted.\n");
    assert!(matches!(&h.events()[..], [Event::Done(Outcome::Reply(r))] if r.code == 250));
}

#[test]
fn abort_swallows_the_late_checks() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.s.set_trailing_size();
    h.s.set_trailing_checksum("CRC32C");
    h.start(Op::Command("STOR /in/f".into()));
    h.sent();
    h.reply("150 Opening.\n");
    h.events();
    h.s.abort(h.now);
    assert_eq!(h.sent(), ["ABOR"]);
    h.reply("426 Aborted.\n226 Abort successful.\n");
    assert_eq!(h.events(), vec![Event::Failed(ClientError::Aborted)]);
    h.start(Op::Size("/in/f".into()));
    assert_eq!(h.sent(), ["TYPE I", "SIZE /in/f"]);
    h.reply("213 5\n213 0a1b2c3d\n");
    assert_eq!(h.events(), vec![], "the checks' late replies are swallowed");
    h.reply("200 Type set to I.\n213 42\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Size(42))]);
}

#[test]
fn other_servers_and_module_commands_get_the_command_alone() {
    let mut h = Scripted::login(GLOBUS_FEAT);
    h.s.set_trailing_size();
    h.s.set_trailing_checksum("CRC32C");
    h.start(Op::Command("STOR /in/f".into()));
    assert_eq!(h.sent(), ["STOR /in/f"]);
    h.reply("150 Opening.\n226 Done.\n");
    let rep = h.report();
    assert_eq!((rep.size, rep.checksum), (None, None));
    // ERET names a module before the path: nothing rides behind it, and the request is used up.
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.s.set_trailing_checksum("CRC32C");
    h.start(Op::Command("ERET P 0 10 /data/f".into()));
    assert_eq!(h.sent(), ["ERET P 0 10 /data/f"]);
    h.reply("150 Opening.\n226 Done.\n");
    assert!(h.report().checksum.is_none());
    h.start(Op::Command("RETR /data/f".into()));
    assert_eq!(h.sent(), ["RETR /data/f"]);
}

#[test]
fn set_up_commands_go_in_one_write_and_every_reply_comes_back() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    let lines = ["TYPE I", "MODE E", "ALLO 42", "SPAS"];
    h.start(Op::Commands(lines.iter().map(|l| l.to_string()).collect()));
    assert_eq!(h.sent(), lines, "one round trip for the whole set-up");
    h.reply("200 Type set to I.\n200 Mode set to E.\n");
    assert_eq!(h.events(), vec![]);
    assert!(
        h.s.poll_timeout().is_some(),
        "the rest have a reply deadline"
    );
    h.reply("504 No ALLO here.\n229-Entering Striped Passive Mode\n 10,0,0,2,8,1\n 10,0,0,3,8,1\n229 End\n");
    match &h.events()[..] {
        [Event::Done(Outcome::Replies(r))] => {
            let codes: Vec<u16> = r.iter().map(|r| r.code).collect();
            assert_eq!(
                codes,
                [200, 200, 504, 229],
                "a refusal is the caller's to judge"
            );
            assert_eq!(parse_spas(&r[3]).map(|a| a.len()), Some(2));
        }
        other => panic!("{other:?}"),
    }
    assert!(!h.s.is_busy());
    h.start(Op::Commands(vec![]));
    assert_eq!(h.events(), vec![Event::Done(Outcome::Replies(vec![]))]);
    assert!(!h.s.is_busy());
}

#[test]
fn other_servers_get_set_up_commands_one_at_a_time() {
    let mut h = Scripted::login(GLOBUS_FEAT);
    h.start(Op::Commands(vec!["TYPE I".into(), "MODE E".into()]));
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect("MODE E", "200 Mode set to E.\n");
    assert!(matches!(&h.events()[..], [Event::Done(Outcome::Replies(r))] if r.len() == 2));
}
