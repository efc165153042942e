//! Cross-cutting dialogue tests of the server session: pipelining, framing errors, queuing behind a running
//! transfer, MODE E markers on the virtual clock, timeouts, and a driver that answers out of turn.

use std::time::Duration;

use drsftp_storage::WriteMode;

use super::testutil::{file, H};
use super::*;
use crate::ranges::RangeSet;

fn progress(bytes: u64, ranges: &str) -> TransferProgress {
    TransferProgress {
        bytes,
        ranges: RangeSet::parse(ranges).unwrap_or_default(),
        stripes: vec![],
    }
}

#[test]
fn session_is_send() {
    fn send<T: Send>() {}
    send::<ServerSession>();
}

#[test]
fn pipelined_commands_in_one_read() {
    let mut h = H::new();
    h.send_raw(b"USER anonymous\r\nPASS x@\nTYPE I\r\nSIZE /f\r\nPWD\r\nBOGUS\r\n");
    assert_eq!(
        h.out(),
        "331 Guest login ok, send your e-mail address as password.\r\n230 User anonymous logged in.\r\n\
         200 Type set to I.\r\n"
    );
    // PWD and BOGUS wait behind the Stat for SIZE, then run in order.
    assert_eq!(
        h.fs(FsRequest::Stat("/f".into()), FsResult::Stat(file("f", 9))),
        "213 9\r\n257 \"/\" is the current directory.\r\n500 Unknown command.\r\n"
    );
    assert_eq!(h.actions(), vec![]);
}

#[test]
fn long_line_unknown_verb_and_garbage_leave_the_session_usable() {
    let mut h = H::with_cfg(ServerConfig {
        max_line: 64,
        ..ServerConfig::default()
    });
    h.login();
    let long = format!("RETR /{}\r\nNOOP\r\n", "a".repeat(500));
    // Split mid-line: the 500 comes as soon as the limit is passed, the tail of that line is discarded.
    h.send_raw(&long.as_bytes()[..100]);
    assert_eq!(h.out(), "500 Command line too long.\r\n");
    h.send_raw(&long.as_bytes()[100..]);
    assert_eq!(h.out(), "200 NOOP command successful.\r\n");
    assert_eq!(h.cmd("XYZZY plugh"), "500 Unknown command.\r\n");
    assert_eq!(h.cmd("\u{1}\u{7f}é"), "500 Unknown command.\r\n");
    assert_eq!(h.cmd(""), "", "empty lines are ignored");
    h.send_raw(b"\xff\xfe\x00\x80\r\n");
    assert_eq!(h.out(), "500 Unknown command.\r\n");
    assert_eq!(h.cmd("noop"), "200 NOOP command successful.\r\n");
}

#[test]
fn path_escape_attempts_resolve_inside_the_virtual_root() {
    let mut h = H::new();
    h.login();
    h.pasv();
    for (arg, want) in [
        ("../../etc/passwd", "/etc/passwd"),
        ("/../../../x", "/x"),
        ("a/./b/../../../..//c", "/c"),
    ] {
        h.send(&format!("RETR {arg}"));
        let r = h.fs(
            FsRequest::Stat(want.into()),
            FsResult::Err(drsftp_storage::StorageError::Escape(want.into())),
        );
        assert!(r.starts_with("550 "), "{r}");
    }
    h.send("SIZE ..");
    assert_eq!(
        h.s.poll_action(),
        Some(Action::Fs(FsRequest::Stat("/".into())))
    );
}

#[test]
fn commands_queue_behind_a_transfer_except_abor_stat_noop_sbuf() {
    let mut h = H::new();
    h.login();
    assert_eq!(h.cmd("OPTS DRS Inband=1;"), "200 DRS Inband=1;\r\n");
    h.pasv();
    let plan = h.retr_file("/f", 100);
    assert!(h.s.is_transferring());
    assert_eq!(h.cmd("NOOP"), "200 NOOP command successful.\r\n");
    assert_eq!(h.cmd("PWD"), "");
    // Behind the queued PWD, NOOP waits too; SBUF <id> <size> jumps ahead.
    assert_eq!(h.cmd("NOOP"), "");
    assert_eq!(h.cmd("SBUF 1 262144"), "200 SBUF 1 262144\r\n");
    assert_eq!(
        h.actions(),
        vec![Action::SetBuffer {
            id: 1,
            size: 262144
        }]
    );
    assert_eq!(h.cmd("QUIT"), "");
    assert!(!h.s.is_closed());
    // Wrong id: ignored.
    h.s.handle_transfer_done(h.now, plan.id + 7, TransferResult::Aborted);
    assert_eq!(h.out(), "");
    assert_eq!(
        h.done_ok(plan.id),
        "226 Transfer complete.\r\n257 \"/\" is the current directory.\r\n200 NOOP command successful.\r\n\
         221 Goodbye.\r\n"
    );
    assert_eq!(h.actions(), vec![Action::Close]);
    assert!(h.s.is_closed());
}

#[test]
fn perf_markers_on_the_timer_for_a_mode_e_stor() {
    // notes §3.3: MODE E upload, Replace: 112 start marker, periodic 112s, final 112 + 111 + 226.
    let mut h = H::new();
    h.s.set_epoch(h.now, 1_795_359_163.8);
    h.login();
    h.cmd("TYPE I");
    h.cmd("MODE E");
    h.pasv();
    h.cmd("ALLO 209715200");
    let start = h.now;
    assert_eq!(
        h.cmd("STOR /tmp/gftp/dst/ul_p4"),
        "125 Beginning MODE E transfer of STOR /tmp/gftp/dst/ul_p4.\r\n\
         112-Perf Marker\r\n Timestamp: 1795359163.8\r\n Stripe Index: 0\r\n Stripe Bytes Transferred: 0\r\n \
         Total Stripe Count: 1\r\n112 End.\r\n"
    );
    let plan = h.transfer();
    assert!(matches!(
        plan.payload,
        Payload::RecvFile {
            write_mode: WriteMode::Replace,
            expected: Some(209715200),
            ..
        }
    ));
    assert_eq!(h.s.poll_timeout(), Some(start + Duration::from_secs(5)));
    h.advance(Duration::from_secs(4));
    h.s.handle_timeout(h.now);
    assert_eq!(h.out(), "", "not due yet");
    h.s.handle_progress(h.now, progress(100_000_000, "0-100000000"));
    h.advance(Duration::from_secs(1));
    h.s.handle_timeout(h.now);
    // Replace upload: no range markers before the file is committed.
    assert_eq!(
        h.out(),
        "112-Perf Marker\r\n Timestamp: 1795359168.8\r\n Stripe Index: 0\r\n Stripe Bytes Transferred: 100000000\r\n \
         Total Stripe Count: 1\r\n112 End.\r\n"
    );
    assert_eq!(h.s.poll_timeout(), Some(start + Duration::from_secs(10)));
    h.advance(Duration::from_millis(500));
    h.s.handle_progress(h.now, progress(209715200, "0-209715200"));
    h.s.handle_transfer_done(
        h.now,
        plan.id,
        TransferResult::Ok {
            bytes: 209715200,
            streams: 4,
        },
    );
    assert_eq!(
        h.out(),
        "112-Perf Marker\r\n Timestamp: 1795359169.3\r\n Stripe Index: 0\r\n Stripe Bytes Transferred: 209715200\r\n \
         Total Stripe Count: 1\r\n112 End.\r\n111 Range Marker 0-209715200\r\n226 Transfer complete.\r\n"
    );
    // Parsed by our own client as Globus markers.
    let mut rd = crate::client::ReplyReader::new();
    rd.push(b"112-Perf Marker\r\n Timestamp: 1795359169.3\r\n Stripe Index: 0\r\n Stripe Bytes Transferred: 7\r\n Total Stripe Count: 1\r\n112 End.\r\n");
    let m = crate::client::parse_perf_marker(&rd.next_reply().unwrap().unwrap()).unwrap();
    assert_eq!((m.stripe_bytes, m.stripe_count), (7, 1));
    // Back to the idle timer.
    assert_eq!(
        h.s.poll_timeout(),
        Some(h.now + ServerConfig::default().idle_timeout)
    );
}

#[test]
fn range_markers_are_incremental_and_relative_for_esto() {
    let mut h = H::new();
    h.login();
    h.cmd("MODE E");
    h.pasv();
    h.cmd("ESTO A 1000 /part");
    let plan = h.transfer();
    h.s.handle_progress(h.now, progress(3000, "1000-3000,5000-6000"));
    h.advance(Duration::from_secs(5));
    h.s.handle_timeout(h.now);
    let out = h.out();
    assert!(
        out.ends_with("112 End.\r\n111 Range Marker 0-2000,4000-5000\r\n"),
        "{out}"
    );
    // Only what is new since the last marker.
    h.s.handle_progress(h.now, progress(6000, "1000-7000"));
    h.advance(Duration::from_secs(5));
    h.s.handle_timeout(h.now);
    assert!(h
        .out()
        .ends_with("111 Range Marker 2000-4000,5000-6000\r\n"));
    h.advance(Duration::from_secs(5));
    h.s.handle_timeout(h.now);
    assert!(h.out().ends_with("112 End.\r\n"), "nothing new: no 111");
    // A failed in-place upload still reports what landed, for a restart.
    h.s.handle_progress(h.now, progress(7000, "1000-8000"));
    h.s.handle_transfer_done(
        h.now,
        plan.id,
        TransferResult::Failed {
            code: 426,
            message: "Connection reset.".into(),
        },
    );
    assert_eq!(
        h.out(),
        "111 Range Marker 6000-7000\r\n426 Connection reset.\r\n"
    );
}

#[test]
fn long_range_lists_are_split_over_several_markers() {
    let mut h = H::new();
    h.login();
    h.cmd("MODE E");
    h.pasv();
    h.cmd("REST 0-1");
    h.cmd("STOR /f");
    let plan = h.transfer();
    let many: RangeSet = (0..500u64).map(|i| i * 10..i * 10 + 5).collect();
    h.s.handle_progress(
        h.now,
        TransferProgress {
            bytes: 2500,
            ranges: many.clone(),
            stripes: vec![],
        },
    );
    h.advance(Duration::from_secs(5));
    h.s.handle_timeout(h.now);
    let out = h.out();
    let mut got = RangeSet::new();
    let markers: Vec<&str> = out.lines().filter(|l| l.starts_with("111 ")).collect();
    assert!(markers.len() > 1);
    for l in markers {
        assert!(l.len() < 1100);
        got.extend(&RangeSet::parse(l.trim_start_matches("111 Range Marker ")).unwrap());
    }
    assert_eq!(got, many);
    h.done_ok(plan.id);
}

#[test]
fn idle_timeout_closes_but_not_during_a_transfer() {
    let mut h = H::with_cfg(ServerConfig {
        idle_timeout: Duration::from_secs(60),
        // The data timeout has its own test below.
        data_timeout: Duration::ZERO,
        ..ServerConfig::default()
    });
    h.login();
    h.pasv();
    let plan = h.retr_file("/f", 10);
    h.advance(Duration::from_secs(3600));
    assert_eq!(h.s.poll_timeout(), None);
    h.s.handle_timeout(h.now);
    assert!(!h.s.is_closed());
    h.done_ok(plan.id);
    let deadline = h.s.poll_timeout().unwrap();
    assert_eq!(deadline, h.now + Duration::from_secs(60));
    h.advance(Duration::from_secs(59));
    h.cmd("NOOP");
    h.advance(Duration::from_secs(59));
    h.s.handle_timeout(h.now);
    assert_eq!(h.out(), "", "NOOP restarted the timer");
    h.advance(Duration::from_secs(1));
    h.s.handle_timeout(h.now);
    assert_eq!(
        h.out(),
        "421 Idle timeout (60 seconds): closing control connection.\r\n"
    );
    assert_eq!(h.actions(), vec![Action::Close]);
    assert!(h.s.is_closed());
}

#[test]
fn a_transfer_without_progress_for_the_data_timeout_ends_with_426() {
    let mut h = H::with_cfg(ServerConfig {
        data_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(900),
        anonymous_write: true,
        ..ServerConfig::default()
    });
    h.login();
    h.pasv();
    let plan = h.retr_file("/f", 1 << 20);
    let t0 = h.now;
    assert_eq!(h.s.poll_timeout(), Some(t0 + Duration::from_secs(60)));
    // Bytes moving restart the clock; the same count again does not.
    h.advance(Duration::from_secs(50));
    h.s.handle_progress(h.now, progress(1000, ""));
    h.advance(Duration::from_secs(50));
    h.s.handle_progress(h.now, progress(1000, ""));
    h.s.handle_timeout(h.now);
    assert!(h.actions().is_empty(), "progress 50 s ago");
    assert_eq!(h.s.poll_timeout(), Some(t0 + Duration::from_secs(110)));
    h.advance(Duration::from_secs(10));
    h.s.handle_timeout(h.now);
    assert_eq!(h.actions(), vec![Action::Abort]);
    assert_eq!(h.s.poll_timeout(), None, "fires once");
    h.s.handle_timeout(h.now);
    assert!(h.actions().is_empty());
    // The driver reports the end (aborted, or its own accept timeout): one 426 naming the timeout, no 226.
    h.s.handle_transfer_done(h.now, plan.id, TransferResult::Aborted);
    let out = h.out();
    assert!(
        out.starts_with("426 Data connection timed out: no data moved for 60 seconds"),
        "{out}"
    );
    assert_eq!(out.lines().count(), 1, "{out}");
    assert_eq!(h.cmd("NOOP"), "200 NOOP command successful.\r\n");
    // A never-connected MODE E upload: the same clock from the start.
    h.cmd("MODE E");
    h.send("STOR /up");
    let r = h.out();
    assert!(r.starts_with("125 "), "{r}");
    let up = h.transfer();
    h.advance(Duration::from_secs(60));
    h.s.handle_timeout(h.now);
    assert_eq!(h.actions(), vec![Action::Abort]);
    h.s.handle_transfer_done(
        h.now,
        up.id,
        TransferResult::Failed {
            code: 425,
            message: "timed out".into(),
        },
    );
    let out = h.out();
    assert!(out.contains("\r\n426 Data connection timed out"), "{out}");
    // Zero turns the rule off.
    let mut h = H::with_cfg(ServerConfig {
        data_timeout: Duration::ZERO,
        ..ServerConfig::default()
    });
    h.login();
    h.pasv();
    h.retr_file("/f", 10);
    assert_eq!(h.s.poll_timeout(), None);
}

#[test]
fn mode_e_receives_cap_their_connections() {
    let mut h = H::with_cfg(ServerConfig {
        max_parallelism: 16,
        anonymous_write: true,
        ..ServerConfig::default()
    });
    h.login();
    h.cmd("MODE E");
    h.pasv();
    let stor = |h: &mut H| {
        h.send("STOR /up");
        h.out();
        let p = h.transfer();
        h.done_ok(p.id);
        p.max_connections
    };
    assert_eq!(stor(&mut h), 16, "nothing negotiated: the server's max");
    h.cmd("OPTS RETR Parallelism=4,4,4;");
    assert_eq!(stor(&mut h), 4);
    h.cmd("OPTS RETR Parallelism=2,1,8;");
    assert_eq!(stor(&mut h), 8, "-p auto uploads add connections up to max");
    assert_eq!(h.retr_file("/f", 10).max_connections, 8);
}

#[test]
fn too_many_queued_commands_close_the_connection() {
    let mut h = H::new();
    h.login();
    h.send("SIZE /f"); // parks on the Stat
    h.send_raw("NOOP\r\n".repeat(MAX_QUEUED_COMMANDS + 1).as_bytes());
    assert_eq!(
        h.out(),
        "421 Too many queued commands; closing control connection.\r\n"
    );
    assert!(h.s.is_closed());
    // Late driver answers are ignored.
    h.s.handle_fs(h.now, FsResult::Done);
    assert_eq!(h.out(), "");
}

#[test]
fn answers_out_of_turn_are_ignored() {
    let mut h = H::new();
    h.login();
    h.s.handle_fs(h.now, FsResult::Done);
    h.s.handle_listening(h.now, Ok(vec!["127.0.0.1:1".parse().unwrap()]));
    h.s.handle_transfer_done(h.now, 1, TransferResult::Aborted);
    h.s.handle_progress(h.now, progress(1, "0-1"));
    assert_eq!(h.out(), "");
    // A listen answer while an Fs request is pending does not consume it.
    h.send("SIZE /f");
    h.s.handle_listening(h.now, Err("x".into()));
    assert_eq!(h.out(), "");
    assert_eq!(
        h.fs(FsRequest::Stat("/f".into()), FsResult::Stat(file("f", 1))),
        "213 1\r\n"
    );
    // Driver error codes outside 400..=599 are mapped to 451; empty messages get a text.
    h.pasv();
    let plan = h.retr_file("/f", 1);
    h.s.handle_transfer_done(
        h.now,
        plan.id,
        TransferResult::Failed {
            code: 226,
            message: "\r\n".into(),
        },
    );
    assert_eq!(h.out(), "451 Transfer failed.\r\n");
}
