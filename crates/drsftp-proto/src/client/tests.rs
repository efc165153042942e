//! Deterministic session tests: scripted servers replaying the Globus control dialogues recorded in
//! notes/globus-peer.md §3, on a virtual clock.

use super::*;
use std::time::Duration;

use super::script_tests::{tcp_spec, Scripted};

/// The next command line sent (without CRLF); panics if none.
fn sent(h: &mut Scripted) -> String {
    h.sent_one().expect("a command was sent")
}

fn nothing_sent(h: &mut Scripted) {
    assert_eq!(h.sent_one(), None);
}

/// Nothing more goes out while the driver binds: the session asks for `bind` and keeps no reply deadline.
fn awaits_bind(h: &mut Scripted, bind: Event) {
    nothing_sent(h);
    assert_eq!(h.events(), vec![bind]);
    assert_eq!(
        h.s.poll_timeout(),
        None,
        "no reply deadline while the driver binds"
    );
}

/// A blast transfer binds its UDP socket before any command goes out (so the set-up can be one batch).
fn blast_bind(h: &mut Scripted, addr: &str) {
    awaits_bind(h, Event::BlastBind);
    h.s.handle_blast_bound(h.now, addr.parse().unwrap());
}

fn login_globus(h: &mut Scripted) {
    h.reply(
        "220 vm GridFTP Server 13.24 (gcc64, 1653033972-1) [Grid Community Toolkit 6.2] ready.\n",
    );
    h.start(Op::Login {
        user: "anonymous".into(),
        pass: "drsftp@".into(),
    });
    h.expect("USER anonymous", "331 Password required for anonymous.\n");
    h.expect("PASS drsftp@", "230 User anonymous logged in.\n");
    h.expect(
        "FEAT",
        "211-Extensions supported\n CKSM MD5:10;ADLER32:10;SHA1:10;SHA256:11;SHA512:12;\n PARALLEL\n SIZE\n ERET\n ESTO\n211 End.\n",
    );
    let ev = h.events();
    assert!(matches!(&ev[..], [Event::Done(Outcome::LoggedIn(f))] if f.parallel()));
    assert_eq!(h.s.features().verify_algorithm(), Some("SHA256"));
}

fn spec(direction: Direction, mode: TransferMode, streams: u32) -> TransferSpec {
    TransferSpec {
        tcp_buffer: Some(4194304),
        ..tcp_spec(direction, "/tmp/gftp/src/f200M", mode, streams)
    }
}

#[test]
fn commands_wait_for_greeting() {
    let mut h = Scripted::new();
    h.start(Op::Login {
        user: "u".into(),
        pass: "p".into(),
    });
    nothing_sent(&mut h);
    h.reply("220 ready\n");
    assert_eq!(sent(&mut h), "USER u");
    assert_eq!(h.s.start(h.now, Op::Quit), Err(ClientError::Busy));
}

#[test]
fn mode_e_download_like_globus_url_copy() {
    // notes §3.2: TYPE I, MODE E, SITE RETRBUFSIZE, OPTS RETR, PORT, RETR, 150, 226.
    let mut h = Scripted::new();
    login_globus(&mut h);
    h.start(Op::Transfer(spec(
        Direction::Download,
        TransferMode::Extended,
        4,
    )));
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect("MODE E", "200 Mode set to E.\n");
    h.expect("SITE RETRBUFSIZE 4194304", "200 Site Command Successful.\n");
    h.expect(
        "OPTS RETR Parallelism=4,4,4;",
        "200 OPTS Command Successful.\n",
    );
    awaits_bind(&mut h, Event::Listen);
    h.s.handle_listening(h.now, "127.0.0.1:60201".parse().unwrap());
    h.expect("PORT 127,0,0,1,235,41", "200 PORT Command successful.\n");
    h.expect("RETR /tmp/gftp/src/f200M", "150 Beginning transfer.\n");
    assert!(matches!(&h.events()[..], [Event::TransferStarted(r)] if r.code == 150));
    assert_eq!(
        h.s.poll_timeout(),
        None,
        "a running transfer has no reply deadline"
    );
    h.reply("226 Transfer Complete.\n");
    let ev = h.events();
    let [Event::Done(Outcome::Transferred(rep))] = &ev[..] else {
        panic!("{ev:?}")
    };
    assert_eq!(
        rep.buffer_command.as_deref(),
        Some("SITE RETRBUFSIZE 4194304")
    );
    assert!(rep.parallelism_accepted);
    assert_eq!(rep.final_reply.as_ref().unwrap().code, 226);

    // A second transfer in the same session does not repeat TYPE/MODE.
    let mut sp = spec(Direction::Download, TransferMode::Extended, 2);
    sp.tcp_buffer = None;
    sp.partial = Some(Partial {
        offset: 1000,
        length: 5000000,
    });
    h.start(Op::Transfer(sp));
    h.expect(
        "OPTS RETR Parallelism=2,2,2;",
        "200 OPTS Command Successful.\n",
    );
    assert_eq!(h.events(), vec![Event::Listen]);
    h.s.handle_listening(h.now, "127.0.0.1:1025".parse().unwrap());
    h.expect("PORT 127,0,0,1,4,1", "200 PORT Command successful.\n");
    h.expect(
        "ERET P 1000 5000000 /tmp/gftp/src/f200M",
        "150 Beginning transfer.\n226 Transfer Complete.\n",
    );
    assert!(matches!(
        h.events().last(),
        Some(Event::Done(Outcome::Transferred(_)))
    ));
}

#[test]
fn mode_e_upload_with_markers() {
    // notes §3.3: PASV, ALLO, STOR, 112 perf markers, 111 range marker, 226.
    let mut h = Scripted::new();
    login_globus(&mut h);
    let mut sp = spec(Direction::Upload, TransferMode::Extended, 4);
    sp.path = "/tmp/gftp/dst/ul_p4".into();
    sp.alloc = Some(209715200);
    h.start(Op::Transfer(sp));
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect("MODE E", "200 Mode set to E.\n");
    h.expect("SITE STORBUFSIZE 4194304", "200 Site Command Successful.\n");
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,146,89)\n");
    assert_eq!(
        h.events(),
        vec![Event::Connect {
            addr: "127.0.0.1:37465".parse().unwrap(),
            streams: 4
        }]
    );
    nothing_sent(&mut h);
    h.s.handle_data_ready(h.now);
    h.expect("ALLO 209715200", "200 ALLO command successful.\n");
    h.expect(
        "STOR /tmp/gftp/dst/ul_p4",
        "150 Beginning transfer.\n112-Perf Marker\n Timestamp:  1795359163.8\n Stripe Index: 0\n Stripe Bytes Transferred: 0\n Total Stripe Count: 1\n112 End.\n",
    );
    h.reply("112-Perf Marker\n Timestamp:  1795359164.3\n Stripe Index: 0\n Stripe Bytes Transferred: 209715200\n Total Stripe Count: 1\n112 End.\n111 Range Marker 0-209715200\n226 Transfer Complete.\n");
    let ev = h.events();
    assert!(matches!(ev[0], Event::TransferStarted(_)));
    assert!(matches!(&ev[1], Event::PerfMarker(p) if p.stripe_bytes == 0));
    assert!(matches!(&ev[2], Event::PerfMarker(p) if p.stripe_bytes == 209715200));
    let whole = 0..209715200;
    assert_eq!(ev[3], Event::RangeMarker(vec![whole]));
    let Event::Done(Outcome::Transferred(rep)) = &ev[4] else {
        panic!()
    };
    assert_eq!(rep.ranges, vec![0..209715200]);
    assert_eq!(rep.last_perf.as_ref().unwrap().stripe_bytes, 209715200);
}

/// A resumed MODE E upload: the ranges the server keeps go out with `REST` before ALLO and STOR; a refusal
/// fails the transfer, since only the gaps would be sent.
#[test]
fn resumed_upload_sends_rest_ranges_or_fails() {
    let mut h = Scripted::new();
    login_globus(&mut h);
    let held: crate::ranges::RangeSet = [0..1000, 5000..9000].into_iter().collect();
    let mut sp = spec(Direction::Upload, TransferMode::Extended, 2);
    sp.tcp_buffer = None;
    sp.path = "/up".into();
    sp.alloc = Some(10000);
    h.s.set_resume(held.clone());
    h.start(Op::Transfer(sp.clone()));
    h.expect("TYPE I", "200 ok\n");
    h.expect("MODE E", "200 ok\n");
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,1,2)\n");
    h.events();
    h.s.handle_data_ready(h.now);
    h.expect("REST 0-1000,5000-9000", "350 Restart Marker OK.\n");
    h.expect("ALLO 10000", "200 ok\n");
    h.expect("STOR /up", "150 go\n226 done\n");
    assert!(matches!(h.events().last(), Some(Event::Done(_))));
    h.s.set_resume(held);
    h.start(Op::Transfer(sp));
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,1,2)\n");
    h.events();
    h.s.handle_data_ready(h.now);
    h.expect("REST 0-1000,5000-9000", "501 no\n");
    let ev = h.events();
    assert!(matches!(ev.last(), Some(Event::Failed(_))), "{ev:?}");
}

#[test]
fn stream_mode_partial_upload_and_mode_switch_back() {
    let mut h = Scripted::new();
    login_globus(&mut h);
    let mut sp = spec(Direction::Upload, TransferMode::Extended, 2);
    sp.tcp_buffer = None;
    sp.path = "/d/p".into();
    sp.partial = Some(Partial {
        offset: 1000,
        length: 5000000,
    });
    h.start(Op::Transfer(sp));
    h.expect("TYPE I", "200 ok\n");
    h.expect("MODE E", "200 ok\n");
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,1,2)\n");
    h.s.handle_data_ready(h.now);
    h.expect("ALLO 5000000", "200 ok\n");
    h.expect(
        "ESTO A 1000 /d/p",
        "150 go\n111 Range Marker 0-5000000\n226 done\n",
    );
    assert!(matches!(h.events().last(), Some(Event::Done(_))));
    // Stream mode afterwards: MODE S is sent, no OPTS, PASV even for a download.
    let mut sp = spec(Direction::Download, TransferMode::Stream, 4);
    sp.tcp_buffer = None;
    h.start(Op::Transfer(sp));
    h.expect("MODE S", "200 ok\n");
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,1,3)\n");
    assert_eq!(
        h.events(),
        vec![Event::Connect {
            addr: "127.0.0.1:259".parse().unwrap(),
            streams: 1
        }]
    );
    h.s.handle_data_ready(h.now);
    h.expect("RETR /tmp/gftp/src/f200M", "125 reusing\n226 ok\n");
    assert!(matches!(h.events().last(), Some(Event::Done(_))));
}

/// A resumed TCP download (against Globus): MODE E sends the held ranges with `REST` right before RETR (a
/// refusal is a notice: the server then sends everything, blocks carry their offsets); stream mode sends the
/// held prefix as an offset, and a refusal fails the transfer (the bytes would land in the wrong place).
#[test]
fn tcp_resume_sends_rest_ranges_or_offset() {
    let mut h = Scripted::new();
    login_globus(&mut h);
    let held: crate::ranges::RangeSet = [0..1000, 5000..9000].into_iter().collect();
    let mut sp = spec(Direction::Download, TransferMode::Extended, 2);
    sp.tcp_buffer = None;
    h.s.set_resume(held.clone());
    h.start(Op::Transfer(sp.clone()));
    h.expect("TYPE I", "200 ok\n");
    h.expect("MODE E", "200 ok\n");
    h.expect("OPTS RETR Parallelism=2,2,2;", "200 ok\n");
    assert_eq!(h.events(), vec![Event::Listen]);
    h.s.handle_listening(h.now, "127.0.0.1:1025".parse().unwrap());
    h.expect("PORT 127,0,0,1,4,1", "200 PORT Command successful.\n");
    h.expect("REST 0-1000,5000-9000", "350 Restart Marker OK.\n");
    h.expect("RETR /tmp/gftp/src/f200M", "150 go\n226 done\n");
    assert!(matches!(h.events().last(), Some(Event::Done(_))));
    // Refused in MODE E: a notice, the transfer goes on.
    h.s.set_resume(held.clone());
    h.start(Op::Transfer(sp.clone()));
    h.expect("OPTS RETR Parallelism=2,2,2;", "200 ok\n");
    h.events();
    h.s.handle_listening(h.now, "127.0.0.1:1025".parse().unwrap());
    h.expect("PORT 127,0,0,1,4,1", "200 ok\n");
    h.expect("REST 0-1000,5000-9000", "501 no\n");
    h.expect("RETR /tmp/gftp/src/f200M", "150 go\n226 done\n");
    let ev = h.events();
    assert!(
        ev.iter()
            .any(|e| matches!(e, Event::Notice(n) if n.contains("REST"))),
        "{ev:?}"
    );
    assert!(matches!(ev.last(), Some(Event::Done(_))), "{ev:?}");
    // Stream mode: the prefix as an offset.
    let mut st = spec(Direction::Download, TransferMode::Stream, 1);
    st.tcp_buffer = None;
    h.s.set_resume(held.clone());
    h.start(Op::Transfer(st.clone()));
    h.expect("MODE S", "200 ok\n");
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,1,3)\n");
    h.events();
    h.s.handle_data_ready(h.now);
    h.expect("REST 1000", "350 Restarting at 1000.\n");
    h.expect("RETR /tmp/gftp/src/f200M", "150 go\n226 done\n");
    assert!(matches!(h.events().last(), Some(Event::Done(_))));
    // Refused in stream mode: the transfer fails before RETR.
    h.s.set_resume(held);
    h.start(Op::Transfer(st.clone()));
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,1,3)\n");
    h.events();
    h.s.handle_data_ready(h.now);
    h.expect("REST 1000", "502 no\n");
    nothing_sent(&mut h);
    assert!(matches!(h.events().last(), Some(Event::Failed(_))));
    // Nothing held from 0: no REST; and the setting is used once.
    let mut late = crate::ranges::RangeSet::new();
    late.insert(5000..9000);
    h.s.set_resume(late);
    h.start(Op::Transfer(st.clone()));
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,1,3)\n");
    h.events();
    h.s.handle_data_ready(h.now);
    h.expect("RETR /tmp/gftp/src/f200M", "150 go\n226 done\n");
    h.events();
    h.start(Op::Transfer(st));
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,1,3)\n");
    h.events();
    h.s.handle_data_ready(h.now);
    h.expect("RETR /tmp/gftp/src/f200M", "150 go\n226 done\n");
}

#[test]
fn buffer_falls_back_to_sbuf_then_continues() {
    let mut h = Scripted::new();
    h.reply("220 hi\n");
    h.start(Op::Login {
        user: "a".into(),
        pass: "b".into(),
    });
    h.expect("USER a", "230 no password needed\n");
    h.expect("FEAT", "502 not here\n");
    assert!(
        matches!(&h.events()[..], [Event::Done(Outcome::LoggedIn(f))] if f.names().count() == 0)
    );
    let sp = spec(Direction::Download, TransferMode::Stream, 1);
    h.start(Op::Transfer(sp));
    h.expect("TYPE I", "200 ok\n");
    h.expect("SITE RETRBUFSIZE 4194304", "500 Invalid command.\n");
    h.expect("SBUF 4194304", "502 no\n");
    assert!(matches!(&h.events()[..], [Event::Notice(_)]));
    h.expect("PASV", "500 no pasv\n");
    h.expect("EPSV", "229 Entering Extended Passive Mode (|||6446|)\n");
    assert_eq!(
        h.events(),
        vec![Event::Connect {
            addr: "127.0.0.1:6446".parse().unwrap(),
            streams: 1
        }]
    );
    h.s.handle_data_ready(h.now);
    h.expect("RETR /tmp/gftp/src/f200M", "550 No such file.\n");
    let ev = h.events();
    let [Event::Failed(ClientError::Refused { command, reply })] = &ev[..] else {
        panic!("{ev:?}")
    };
    assert_eq!(command, "RETR /tmp/gftp/src/f200M");
    assert_eq!(reply.code, 550);
    assert!(
        !h.s.is_dead(),
        "a refused transfer leaves the session usable"
    );
}

#[test]
fn size_checksum_list_raw_quit() {
    let mut h = Scripted::new();
    login_globus(&mut h);
    // SIZE goes out in binary mode: a server may refuse it under TYPE A (RFC 3659 §4).
    h.start(Op::Size("/f".into()));
    h.expect("TYPE I", "200 ok\n");
    h.expect("SIZE /f", "213 209715200\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Size(209715200))]);
    h.start(Op::Checksum {
        algorithm: "MD5".into(),
        offset: 0,
        length: None,
        path: "/f".into(),
    });
    h.expect("CKSM MD5 0 -1 /f", "213 55013D97c2a4df3d8d27523168a2a12c\n");
    assert_eq!(
        h.events(),
        vec![Event::Done(Outcome::Checksum(
            "55013d97c2a4df3d8d27523168a2a12c".into()
        ))]
    );
    h.start(Op::Checksum {
        algorithm: "MD5".into(),
        offset: 5,
        length: Some(9),
        path: "/f".into(),
    });
    h.expect("CKSM MD5 5 9 /f", "213 not hex!\n");
    assert!(matches!(
        &h.events()[..],
        [Event::Failed(ClientError::BadReply { .. })]
    ));
    h.start(Op::List {
        path: "/tmp".into(),
        kind: ListKind::Mlsd,
    });
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,0,21)\n");
    h.s.handle_data_ready(h.now);
    h.expect("MLSD /tmp", "150 Opening\n226 Closing\n");
    assert!(matches!(h.events().last(), Some(Event::Done(Outcome::Listed(r))) if r.code == 226));
    h.start(Op::Command("SITE HELP".into()));
    h.expect(
        "SITE HELP",
        "214-The following commands are recognized:\n ALLO APPE\n214 End\n",
    );
    assert!(
        matches!(&h.events()[..], [Event::Done(Outcome::Reply(r))] if r.code == 214 && r.lines.len() == 3)
    );
    h.start(Op::Quit);
    h.expect("QUIT", "221 Goodbye.\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Closed)]);
    assert!(h.s.is_dead());
}

#[test]
fn reply_timeout_is_fatal_and_virtual() {
    let mut h = Scripted::new();
    assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_secs(60)));
    h.reply("220 hi\n");
    h.start(Op::Size("/x".into()));
    assert_eq!(sent(&mut h), "TYPE I");
    h.reply("200 ok\n");
    assert_eq!(sent(&mut h), "SIZE /x");
    let d = h.s.poll_timeout().unwrap();
    h.s.handle_timeout(d - Duration::from_millis(1));
    assert!(h.events().is_empty());
    h.s.handle_timeout(d);
    assert_eq!(
        h.events(),
        vec![Event::Failed(ClientError::Timeout("SIZE /x".into()))]
    );
    assert!(h.s.is_dead());
    assert_eq!(h.s.start(h.now, Op::Quit), Err(ClientError::Busy));
}

#[test]
fn abort_running_transfer() {
    let mut h = Scripted::new();
    login_globus(&mut h);
    let mut sp = spec(Direction::Download, TransferMode::Stream, 1);
    sp.tcp_buffer = None;
    h.start(Op::Transfer(sp));
    h.expect("TYPE I", "200 ok\n");
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,0,21)\n");
    h.s.handle_data_ready(h.now);
    h.expect("RETR /tmp/gftp/src/f200M", "150 go\n");
    h.events();
    h.s.abort(h.now);
    assert_eq!(sent(&mut h), "ABOR");
    h.reply("426 Data connection closed; transfer aborted.\n");
    assert!(h.events().is_empty());
    h.reply("226 Abort successful\n");
    assert_eq!(h.events(), vec![Event::Failed(ClientError::Aborted)]);
    assert!(!h.s.is_dead());
    // Abort while parked waiting for the driver: fails at once, nothing sent.
    let sp = spec(Direction::Download, TransferMode::Extended, 2);
    h.start(Op::Transfer(sp));
    h.expect("MODE E", "200 ok\n");
    h.expect("SITE RETRBUFSIZE 4194304", "200 ok\n");
    h.expect("OPTS RETR Parallelism=2,2,2;", "200 ok\n");
    assert_eq!(h.events(), vec![Event::Listen]);
    h.s.abort(h.now);
    assert_eq!(h.events(), vec![Event::Failed(ClientError::Aborted)]);
    nothing_sent(&mut h);
}

#[test]
fn abort_keeps_the_transfers_own_refusal() {
    let mut h = Scripted::new();
    login_globus(&mut h);
    let mut sp = spec(Direction::Upload, TransferMode::Stream, 1);
    sp.tcp_buffer = None;
    h.start(Op::Transfer(sp));
    h.expect("TYPE I", "200 ok\n");
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,0,21)\n");
    h.s.handle_data_ready(h.now);
    let stor = sent(&mut h);
    assert!(stor.starts_with("STOR "), "{stor}");
    h.reply("150 go\n");
    h.events();
    // The server's disk filled: it dropped the data connection, the client aborts, and the 452 that arrives
    // before ABOR's own answer is what the operation fails with.
    h.s.abort(h.now);
    assert_eq!(sent(&mut h), "ABOR");
    h.reply("452 storage: no space left on device\n");
    assert!(h.events().is_empty());
    h.reply("226 Abort successful\n");
    match &h.events()[..] {
        [Event::Failed(ClientError::Refused { command, reply })] => {
            assert_eq!((command.as_str(), reply.code), (stor.as_str(), 452));
        }
        other => panic!("{other:?}"),
    }
    assert!(!h.s.is_dead());
}

#[test]
fn framing_errors_and_eof_are_fatal() {
    let mut h = Scripted::new();
    h.reply("220 hi\n");
    h.start(Op::Size("/x".into()));
    sent(&mut h);
    h.reply("HTTP/1.1 400 Bad Request\n");
    assert!(matches!(
        &h.events()[..],
        [Event::Failed(ClientError::Framing(_))]
    ));
    assert!(h.s.is_dead());
    let mut h = Scripted::new();
    h.s.handle_eof();
    assert_eq!(h.events(), vec![Event::Failed(ClientError::Closed)]);
    let mut h = Scripted::new();
    h.reply("421 too many users\n");
    assert!(matches!(
        &h.events()[..],
        [Event::Failed(ClientError::Refused { .. })]
    ));
}

#[test]
fn password_is_masked_in_errors() {
    let mut h = Scripted::new();
    h.reply("220 hi\n");
    h.start(Op::Login {
        user: "u".into(),
        pass: "secret".into(),
    });
    h.expect("USER u", "331 pw\n");
    h.expect("PASS secret", "530 Login incorrect.\n");
    let ev = h.events();
    let [Event::Failed(e)] = &ev[..] else {
        panic!()
    };
    assert!(!e.to_string().contains("secret"), "{e}");
}

fn blast_spec(direction: Direction, path: &str) -> TransferSpec {
    TransferSpec {
        tcp_buffer: Some(4 << 20),
        alloc: (direction == Direction::Upload).then_some(5000),
        transport: Transport::Blast(BlastRequest {
            mtu: 1500,
            max_rate: 500_000_000,
            ack_every: None,
            start_rate: 0,
        }),
        ..tcp_spec(direction, path, TransferMode::Stream, 1)
    }
}

/// FEAT of a drsftp server offering the UDP blast transport.
const BLAST_FEAT: &str = "211-Extensions supported:\n PARALLEL\n CKSM SHA256;\n BLAST\n211 End.\n";

/// A resumed blast download says what it holds with `REST <ranges>` right before RETR; a refusal is a notice;
/// the setting is used by one transfer only.
#[test]
fn blast_resume_sends_rest_ranges_once() {
    let mut h = Scripted::login(BLAST_FEAT);
    let held: crate::ranges::RangeSet = [0..1436, 2872..5000].into_iter().collect();
    for (answer, notice) in [
        (
            "350 Restart Marker OK. Send STORE or RETR to initiate transfer.\n",
            false,
        ),
        ("501 Syntax error in REST argument.\n", true),
    ] {
        h.s.set_resume(held.clone());
        h.start(Op::Transfer(blast_spec(Direction::Download, "/f")));
        blast_bind(&mut h, "127.0.0.1:40000");
        if !notice {
            // First time round only: the session remembers TYPE I.
            h.expect("TYPE I", "200 Type set to I.\n");
        }
        h.expect(
            "OPTS BLAST MTU=1500;Rate=500000000;",
            "200 OPTS BLAST MTU=1500;Rate=0;\n",
        );
        h.expect(
            "BPAS 127,0,0,1,156,64",
            "229 Entering Blast Passive Mode (127,0,0,1,156,65) Id=1\n",
        );
        h.expect("REST 0-1436,2872-5000", answer);
        h.expect(
            "RETR /f",
            "150 Opening BLAST data channel for RETR /f (Size=5000;Packet=1436;).\n",
        );
        h.reply("226 Transfer complete.\n");
        let ev = h.events();
        let refused = ev
            .iter()
            .any(|e| matches!(e, Event::Notice(n) if n.contains("REST")));
        assert_eq!(refused, notice, "{ev:?}");
        assert!(
            matches!(ev.last(), Some(Event::Done(Outcome::Transferred(_)))),
            "{ev:?}"
        );
    }
    // Not carried over to the next transfer.
    h.start(Op::Transfer(blast_spec(Direction::Download, "/f")));
    blast_bind(&mut h, "127.0.0.1:40000");
    h.expect(
        "OPTS BLAST MTU=1500;Rate=500000000;",
        "200 OPTS BLAST MTU=1500;Rate=0;\n",
    );
    h.expect(
        "BPAS 127,0,0,1,156,64",
        "229 Entering Blast Passive Mode (127,0,0,1,156,65) Id=2\n",
    );
    h.expect(
        "RETR /f",
        "150 Opening BLAST data channel for RETR /f (Size=5000;Packet=1436;).\n",
    );
}

#[test]
fn blast_download_and_upload_dialogues() {
    let mut h = Scripted::login(BLAST_FEAT);
    h.start(Op::Transfer(blast_spec(Direction::Download, "/data/f")));
    blast_bind(&mut h, "127.0.0.1:40000");
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect(
        "OPTS BLAST MTU=1500;Rate=500000000;",
        "200 OPTS BLAST MTU=1500;Rate=400000000;\n",
    );
    h.expect(
        "BPAS 127,0,0,1,156,64",
        "229 Entering Blast Passive Mode (127,0,0,1,156,65) Id=00000000000000ff\n",
    );
    assert_eq!(h.s.blast_channel(), None, "not before the 150");
    h.expect(
        "RETR /data/f",
        "150 Opening BLAST data channel for RETR /data/f (Size=104857600;Packet=1436;).\n",
    );
    assert!(matches!(&h.events()[..], [Event::TransferStarted(r)] if r.code == 150));
    let ch = BlastChannel {
        peer: "127.0.0.1:40001".parse().unwrap(),
        transfer_id: 0xff,
        size: 104_857_600,
        payload_size: 1436,
        max_rate: 400_000_000,
    };
    assert_eq!(h.s.blast_channel(), Some(ch));
    h.reply("226 Transfer complete.\n");
    let ev = h.events();
    let [Event::Done(Outcome::Transferred(rep))] = &ev[..] else {
        panic!("{ev:?}")
    };
    assert_eq!(rep.blast, Some(ch));
    assert_eq!(rep.buffer_command, None, "no TCP buffer commands for blast");

    // Upload: ALLO before STOR; no MODE/TYPE repeated.
    h.start(Op::Transfer(blast_spec(Direction::Upload, "/in/f")));
    blast_bind(&mut h, "127.0.0.1:40002");
    h.expect(
        "OPTS BLAST MTU=1500;Rate=500000000;",
        "200 OPTS BLAST MTU=1500;Rate=0;\n",
    );
    h.expect(
        "BPAS 127,0,0,1,156,66",
        "229 Entering Blast Passive Mode (0,0,0,0,156,67) Id=7\n",
    );
    h.expect("ALLO 5000", "200 ALLO command successful.\n");
    h.expect(
        "STOR /in/f",
        "150 Opening BLAST data channel for STOR /in/f (Size=5000;Packet=1436;).\n",
    );
    let ch = h.s.blast_channel().unwrap();
    assert_eq!(
        ch.peer,
        "127.0.0.1:40003".parse().unwrap(),
        "wildcard host = control peer"
    );
    assert_eq!((ch.size, ch.max_rate, ch.transfer_id), (5000, 0, 7));
    h.reply("226 Transfer complete.\n");
    assert!(matches!(
        &h.events()[..],
        [Event::TransferStarted(_), Event::Done(_)]
    ));
}

#[test]
fn blast_falls_back_to_tcp_without_feat_and_fails_on_refusal() {
    // Globus lists no BLAST: the same spec runs over TCP, with a notice.
    let mut h = Scripted::new();
    login_globus(&mut h);
    h.start(Op::Transfer(blast_spec(Direction::Download, "/f")));
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect("SITE RETRBUFSIZE 4194304", "200 Site Command Successful.\n");
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,156,64)\n");
    assert!(matches!(&h.events()[..], [Event::Connect { .. }]));
    h.s.handle_data_ready(h.now);
    h.expect("RETR /f", "150 Beginning transfer.\n");
    assert_eq!(h.s.blast_channel(), None);
    h.reply("226 Transfer Complete.\n");
    let ev = h.events();
    let [Event::TransferStarted(_), Event::Done(Outcome::Transferred(rep))] = &ev[..] else {
        panic!("{ev:?}")
    };
    assert_eq!(rep.blast, None);
    assert!(rep
        .notices
        .iter()
        .any(|n| n.contains("does not offer BLAST")));

    // A server that lists BLAST but refuses the options or the channel: the operation fails.
    let mut h = Scripted::login(BLAST_FEAT);
    h.start(Op::Transfer(blast_spec(Direction::Download, "/f")));
    blast_bind(&mut h, "127.0.0.1:40000");
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect(
        "OPTS BLAST MTU=1500;Rate=500000000;",
        "502 BLAST is disabled.\n",
    );
    assert!(matches!(&h.events()[..], [Event::Failed(e)] if e.reply_code() == Some(502)));
    h.start(Op::Transfer(blast_spec(Direction::Download, "/f")));
    blast_bind(&mut h, "127.0.0.1:40000");
    h.expect(
        "OPTS BLAST MTU=1500;Rate=500000000;",
        "200 OPTS BLAST MTU=1500;Rate=0;\n",
    );
    h.expect("BPAS 127,0,0,1,156,64", "229 Entering Blast Passive Mode\n");
    assert!(matches!(
        &h.events()[..],
        [Event::Failed(ClientError::BadReply { .. })]
    ));
    assert!(!h.s.is_dead());
}
