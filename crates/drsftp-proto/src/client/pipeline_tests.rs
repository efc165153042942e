//! Command pipelining tests: scripted drsftp servers (FEAT lists `DRS`) get the transfer set-up back to back and
//! PORT with RETR, replies are matched in order (also when they come in one read), replies to commands behind a
//! refusal or an ABOR are swallowed rather than given to the next operation; the blast set-up (`OPTS BLAST`,
//! `BPAS`, `REST`, RETR) goes out in one round; a Globus server still gets one command at a time.

use std::time::Duration;

use super::script_tests::{tcp_spec, Scripted, DRSFTP_FEAT, GLOBUS_FEAT};
use super::*;

const SETUP: [&str; 4] = [
    "TYPE I",
    "MODE E",
    "OPTS DRS Inband=1;",
    "OPTS RETR Parallelism=4,4,4;",
];

type H = Scripted;

impl Scripted {
    fn deadline_armed(&self) -> bool {
        self.s.poll_timeout() == Some(self.now + ClientConfig::default().reply_timeout)
    }
    fn start_download(&mut self, drs: bool) {
        let spec = TransferSpec {
            drs,
            ..tcp_spec(Direction::Download, "/data/f", TransferMode::Extended, 4)
        };
        self.s.start(self.now, Op::Transfer(spec)).unwrap();
    }
    fn listen(&mut self) {
        assert_eq!(self.events(), vec![Event::Listen]);
        assert_eq!(self.s.poll_timeout(), None, "no deadline while parked");
        self.s
            .handle_listening(self.now, "127.0.0.1:60201".parse().unwrap());
    }
    /// `SIZE` right after a failed operation gets its own reply, whatever arrived before it.
    fn size_after(&mut self, stale: &str) {
        self.s.start(self.now, Op::Size("/data/f".into())).unwrap();
        assert_eq!(
            self.sent(),
            ["SIZE /data/f"],
            "no need to wait for the stale replies"
        );
        assert!(self.deadline_armed());
        self.reply(stale);
        assert_eq!(self.events(), vec![], "stale replies are swallowed");
        assert!(self.s.is_busy());
        self.reply("213 42\n");
        assert_eq!(self.events(), vec![Event::Done(Outcome::Size(42))]);
    }
}

#[test]
fn drsftp_download_pipelines_setup_then_port_with_retr() {
    let mut h = H::login(DRSFTP_FEAT);
    h.start_download(true);
    assert_eq!(h.sent(), SETUP, "the whole set-up in one round");
    // The listener does not wait for the set-up replies (nothing in them changes it: no SPAS), so PORT and
    // RETR leave in the same round.
    assert_eq!(h.events(), vec![Event::Listen]);
    assert!(
        h.deadline_armed(),
        "the set-up replies keep their deadline while the driver listens"
    );
    h.s.handle_listening(h.now, "127.0.0.1:60201".parse().unwrap());
    assert_eq!(h.sent(), ["PORT 127,0,0,1,235,41", "RETR /data/f"]);
    // Replies one by one: nothing more goes out, the deadline stays armed.
    for r in [
        "200 Type set to I.\n",
        "200 Mode set to E.\n",
        "200 DRS Inband=1;\n",
        "200 OPTS Command Successful.\n",
        "200 PORT Command successful.\n",
    ] {
        h.now += Duration::from_millis(100);
        h.reply(r);
        assert_eq!(h.sent(), Vec::<String>::new());
        assert_eq!(h.events(), vec![]);
        assert!(h.deadline_armed(), "re-armed for the next reply in flight");
    }
    assert!(h.s.drs_negotiated());
    h.reply("125 Beginning MODE E transfer of RETR /data/f.\n");
    assert!(matches!(&h.events()[..], [Event::TransferStarted(r)] if r.code == 125));
    assert_eq!(
        h.s.poll_timeout(),
        None,
        "a running transfer has no deadline"
    );
    // SBUF and its echo work as before: the transfer is the head of the queue.
    h.s.send_sbuf(h.now, 1, 65536).unwrap();
    assert_eq!(h.sent(), ["SBUF 1 65536"]);
    h.reply("200 SBUF 1 65536\n111 Range Marker 0-1000\n226 Transfer complete.\n");
    let ev = h.events();
    assert_eq!(ev[0], Event::SbufEcho { id: 1, size: 65536 });
    let first = 0..1000;
    assert_eq!(ev[1], Event::RangeMarker(vec![first]));
    let Some(Event::Done(Outcome::Transferred(rep))) = ev.get(2) else {
        panic!("{ev:?}")
    };
    assert!(rep.parallelism_accepted && rep.drs_negotiated);
    assert_eq!(rep.ranges, vec![0..1000]);
    assert_eq!(rep.final_reply.as_ref().unwrap().code, 226);
    assert!(rep.notices.is_empty(), "{rep:?}");
    assert!(!h.s.is_busy());
    // The next download only needs OPTS RETR before the listener.
    h.start_download(true);
    h.batch(
        &["OPTS RETR Parallelism=4,4,4;"],
        "200 OPTS Command Successful.\n",
    );
    h.listen();
    h.batch(
        &["PORT 127,0,0,1,235,41", "RETR /data/f"],
        "200 PORT Command successful.\n125 Go.\n226 Transfer complete.\n",
    );
    assert!(matches!(
        h.events().last(),
        Some(Event::Done(Outcome::Transferred(_)))
    ));
}

#[test]
fn replies_in_one_read_are_matched_in_order() {
    let mut h = H::login(DRSFTP_FEAT);
    h.start_download(true);
    h.batch(
        &SETUP,
        "200 Type set to I.\n200 Mode set to E.\n200 DRS Inband=1;\n500 OPTS RETR refused.\n",
    );
    let ev = h.events();
    assert!(
        matches!(&ev[..], [Event::Listen, Event::Notice(n)] if n.contains("OPTS RETR")),
        "{ev:?}"
    );
    h.s.handle_listening(h.now, "127.0.0.1:60201".parse().unwrap());
    h.batch(
        &["PORT 127,0,0,1,235,41", "RETR /data/f"],
        "200 PORT Command successful.\n150 Opening.\n112-Perf Marker\n Timestamp:  1795359164.3\n \
         Stripe Index: 0\n Stripe Bytes Transferred: 1000\n Total Stripe Count: 1\n112 End.\n\
         226 Transfer complete.\n",
    );
    let ev = h.events();
    let [Event::TransferStarted(_), Event::PerfMarker(p), Event::Done(Outcome::Transferred(rep))] =
        &ev[..]
    else {
        panic!("{ev:?}")
    };
    assert_eq!(p.stripe_bytes, 1000);
    assert!(!rep.parallelism_accepted && rep.drs_negotiated);
    assert_eq!(rep.notices.len(), 1);
}

#[test]
fn size_follows_type_i_in_one_round_and_a_refused_type_swallows_its_reply() {
    let mut h = H::login(DRSFTP_FEAT);
    h.start(Op::Size("/data/f".into()));
    assert_eq!(h.sent(), ["TYPE I", "SIZE /data/f"], "one round trip");
    h.reply("200 Type set to I.\n");
    assert_eq!(h.events(), vec![]);
    h.reply("213 42\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Size(42))]);
    // A server that refuses TYPE I: the operation fails, and the SIZE reply behind it is not the next one's.
    let mut h = H::login(DRSFTP_FEAT);
    h.start(Op::Size("/data/f".into()));
    h.batch(&["TYPE I", "SIZE /data/f"], "504 no\n");
    assert!(matches!(&h.events()[..], [Event::Failed(e)] if e.reply_code() == Some(504)));
    h.start(Op::Size("/data/g".into()));
    assert_eq!(h.sent(), ["TYPE I", "SIZE /data/g"]);
    h.reply("550 stale SIZE reply\n200 Type set to I.\n213 7\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Size(7))]);
}

#[test]
fn globus_server_gets_one_command_at_a_time() {
    let mut h = H::login(GLOBUS_FEAT);
    assert!(!h.s.features().drs());
    h.start_download(true);
    // No OPTS DRS for Globus, and each command waits for the previous reply.
    h.batch(&["TYPE I"], "200 Type set to I.\n");
    h.batch(&["MODE E"], "200 Mode set to E.\n");
    assert!(h.deadline_armed());
    h.batch(
        &["OPTS RETR Parallelism=4,4,4;"],
        "200 OPTS Command Successful.\n",
    );
    h.listen();
    h.batch(&["PORT 127,0,0,1,235,41"], "200 PORT Command successful.\n");
    h.batch(&["RETR /data/f"], "150 Beginning transfer.\n");
    h.reply("226 Transfer Complete.\n");
    assert!(matches!(
        h.events().last(),
        Some(Event::Done(Outcome::Transferred(r))) if !r.drs_negotiated
    ));
    // A buffer size with its SBUF fallback: still one at a time.
    let mut sp = TransferSpec {
        tcp_buffer: Some(1 << 20),
        ..tcp_spec(Direction::Download, "/data/f", TransferMode::Stream, 1)
    };
    h.start(Op::Transfer(sp.clone()));
    h.batch(&["MODE S"], "200 ok\n");
    h.batch(&["SITE RETRBUFSIZE 1048576"], "500 no\n");
    h.batch(&["SBUF 1048576"], "200 ok\n");
    h.batch(&["PASV"], "227 Entering Passive Mode (127,0,0,1,1,2)\n");
    h.s.handle_data_ready(h.now);
    h.batch(&["RETR /data/f"], "150 go\n226 ok\n");
    assert!(matches!(h.events().last(), Some(Event::Done(_))));
    // Not even after a failure: a refused MODE leaves nothing to swallow.
    sp.mode = TransferMode::Extended;
    sp.tcp_buffer = None;
    h.start(Op::Transfer(sp));
    h.batch(&["MODE E"], "504 no\n");
    assert!(matches!(&h.events()[..], [Event::Failed(e)] if e.reply_code() == Some(504)));
    h.start(Op::Size("/data/f".into()));
    h.batch(&["SIZE /data/f"], "213 42\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Size(42))]);
}

#[test]
fn refused_mode_swallows_the_pipelined_replies() {
    let mut h = H::login(DRSFTP_FEAT);
    h.start_download(true);
    h.batch(
        &SETUP,
        "200 Type set to I.\n504 Command not implemented for that parameter.\n",
    );
    let ev = h.events();
    let [Event::Listen, Event::Failed(ClientError::Refused { command, reply })] = &ev[..] else {
        panic!("{ev:?}")
    };
    assert_eq!((command.as_str(), reply.code), ("MODE E", 504));
    // The listener the driver opens now finds the operation gone: nothing more goes out.
    h.s.handle_listening(h.now, "127.0.0.1:60201".parse().unwrap());
    assert!(h.sent().is_empty());
    assert_eq!(h.s.poll_timeout(), None);
    assert!(!h.s.is_busy() && !h.s.is_dead());
    // OPTS DRS and OPTS RETR were answered too; those replies are not the SIZE's.
    h.size_after("200 DRS Inband=1;\n200 OPTS Command Successful.\n");
    // The next transfer repeats MODE E and OPTS DRS (their outcome on the server was not seen), not TYPE I.
    h.start_download(true);
    h.batch(
        &SETUP[1..],
        "200 Mode set to E.\n200 DRS Inband=1;\n200 OPTS Command Successful.\n",
    );
    h.listen();
    assert!(h.s.drs_negotiated());
}

#[test]
fn a_buffer_fallback_ends_a_batch() {
    let mut h = H::login(DRSFTP_FEAT);
    let spec = TransferSpec {
        streams_range: Some((1, 8)),
        tcp_buffer: Some(4194304),
        drs: true,
        ..tcp_spec(Direction::Download, "/data/f", TransferMode::Extended, 2)
    };
    h.start(Op::Transfer(spec));
    h.batch(
        &["TYPE I", "MODE E", "SITE RETRBUFSIZE 4194304"],
        "200 ok\n200 ok\n500 unknown SITE command\n",
    );
    // The SBUF inserted by the refusal goes first, and the rest of the set-up rides along.
    h.batch(
        &[
            "SBUF 4194304",
            "OPTS DRS Inband=1;",
            "OPTS RETR Parallelism=2,1,8;",
        ],
        "200 ok\n200 DRS Inband=1;\n200 ok\n",
    );
    h.listen();
    h.batch(
        &["PORT 127,0,0,1,235,41", "RETR /data/f"],
        "200 ok\n150 go\n226 done\n",
    );
    let ev = h.events();
    let Some(Event::Done(Outcome::Transferred(rep))) = ev.last() else {
        panic!("{ev:?}")
    };
    assert_eq!(rep.buffer_command.as_deref(), Some("SBUF 4194304"));
}

#[test]
fn refused_port_swallows_the_retr_and_its_preliminaries() {
    let mut h = H::login(DRSFTP_FEAT);
    h.start_download(false);
    h.batch(
        &["TYPE I", "MODE E", "OPTS RETR Parallelism=4,4,4;"],
        "200 ok\n200 ok\n200 ok\n",
    );
    h.listen();
    h.batch(
        &["PORT 127,0,0,1,235,41", "RETR /data/f"],
        "501 Illegal PORT command.\n",
    );
    assert!(matches!(&h.events()[..], [Event::Failed(e)] if e.reply_code() == Some(501)));
    // The server may still answer RETR with a 150, markers and a failure: none of it reaches the next op.
    h.size_after(
        "150 Opening.\n112-Perf Marker\n Timestamp:  1.0\n Stripe Index: 0\n \
         Stripe Bytes Transferred: 0\n Total Stripe Count: 1\n112 End.\n425 Can't open data connection.\n",
    );
}

#[test]
fn upload_to_a_drsftp_server_over_pasv() {
    let mut h = H::login(DRSFTP_FEAT);
    let spec = TransferSpec {
        alloc: Some(5000),
        drs: true,
        ..tcp_spec(Direction::Upload, "/in/f", TransferMode::Extended, 4)
    };
    h.start(Op::Transfer(spec));
    h.batch(
        &["TYPE I", "MODE E", "OPTS DRS Inband=1;", "PASV"],
        "200 Type set to I.\n200 Mode set to E.\n",
    );
    assert_eq!(h.events(), vec![], "the connection waits for PASV's reply");
    h.reply("200 DRS Inband=1;\n227 Entering Passive Mode (127,0,0,1,156,64)\n");
    assert_eq!(
        h.events(),
        vec![Event::Connect {
            addr: "127.0.0.1:40000".parse().unwrap(),
            streams: 4
        }]
    );
    // The STOR does not wait for the data connections: the driver makes them once it has sent it.
    assert_eq!(h.sent(), ["ALLO 5000", "STOR /in/f"]);
    assert!(h.deadline_armed());
    h.s.handle_data_ready(h.now);
    assert!(
        h.sent().is_empty(),
        "nothing was waiting for the connections"
    );
    h.reply(
        "200 ALLO command successful.\n150 Go.\n111 Range Marker 0-5000\n226 Transfer complete.\n",
    );
    let ev = h.events();
    let Some(Event::Done(Outcome::Transferred(rep))) = ev.last() else {
        panic!("{ev:?}")
    };
    assert!(rep.drs_negotiated);
    assert_eq!(rep.ranges, vec![0..5000]);
}

#[test]
fn abort_with_port_and_retr_in_flight() {
    let mut h = H::login(DRSFTP_FEAT);
    h.start_download(true);
    h.batch(&SETUP, "200 ok\n200 ok\n200 DRS Inband=1;\n200 ok\n");
    h.listen();
    assert_eq!(h.sent().len(), 2);
    h.s.abort(h.now);
    assert_eq!(h.sent(), ["ABOR"]);
    assert_eq!(h.s.send_sbuf(h.now, 1, 1), Err(ClientError::NoTransfer));
    // PORT, RETR (started, then aborted), then ABOR's own reply.
    h.reply("200 PORT Command successful.\n150 Opening.\n");
    assert!(h.events().is_empty());
    h.reply("426 Transfer aborted.\n");
    assert!(h.events().is_empty());
    assert!(h.deadline_armed());
    h.reply("226 Abort successful.\n");
    assert_eq!(h.events(), vec![Event::Failed(ClientError::Aborted)]);
    h.size_after("");
}

#[test]
fn abort_during_the_setup_batch_fails_at_once() {
    let mut h = H::login(DRSFTP_FEAT);
    h.start_download(true);
    h.batch(&SETUP, "200 Type set to I.\n");
    h.s.abort(h.now);
    assert_eq!(
        h.events(),
        vec![Event::Listen, Event::Failed(ClientError::Aborted)]
    );
    assert_eq!(
        h.sent(),
        Vec::<String>::new(),
        "no ABOR before the transfer command"
    );
    h.size_after("200 ok\n200 DRS Inband=1;\n200 ok\n");
}

#[test]
fn a_timeout_names_the_oldest_command_in_flight() {
    let mut h = H::login(DRSFTP_FEAT);
    h.start_download(true);
    h.batch(&SETUP, "200 Type set to I.\n");
    let d = h.s.poll_timeout().unwrap();
    h.s.handle_timeout(d);
    assert_eq!(
        h.events(),
        vec![
            Event::Listen,
            Event::Failed(ClientError::Timeout("MODE E".into()))
        ]
    );
    assert!(h.s.is_dead());
}

const BLAST_DRSFTP_FEAT: &str =
    "211-Extensions supported:\n SIZE\n PARALLEL\n DRS\n CKSM SHA256;\n BLAST BPRT\n211 End.\n";

fn blast(direction: Direction, path: &str) -> TransferSpec {
    TransferSpec {
        alloc: (direction == Direction::Upload).then_some(5000),
        transport: Transport::Blast(BlastRequest {
            start_rate: 180_000_000,
            ..BlastRequest::default()
        }),
        ..tcp_spec(direction, path, TransferMode::Stream, 1)
    }
}

/// Issue 22: a short blast transfer must not spend a round trip per set-up command. The UDP socket is bound
/// first (locally), then TYPE I, `OPTS BLAST`, `BPAS`, `REST <ranges>` and RETR leave together: the `150` comes
/// one round trip after the operation began (it took five). Counted on the virtual clock: each reply arrives
/// one 200 ms RTT after the batch it answers.
#[test]
fn blast_setup_is_one_round_trip_with_a_drsftp_server() {
    let rtt = Duration::from_millis(200);
    let mut h = H::login(BLAST_DRSFTP_FEAT);
    h.s.set_resume(std::iter::once(0..1436u64).collect());
    let begin = h.now;
    h.start(Op::Transfer(blast(Direction::Download, "/f")));
    assert_eq!(h.events(), vec![Event::BlastBind]);
    assert_eq!(h.sent(), Vec::<String>::new(), "the socket first");
    h.s.handle_blast_bound(h.now, "127.0.0.1:40000".parse().unwrap());
    assert_eq!(
        h.sent(),
        [
            "TYPE I",
            "OPTS BLAST MTU=1500;Rate=0;Start=180000000;",
            "BPAS 127,0,0,1,156,64",
            "REST 0-1436",
            "RETR /f",
        ]
    );
    h.now += rtt;
    h.reply(
        "200 Type set to I.\n200 OPTS BLAST MTU=1500;Rate=0;Start=180000000;\n\
         229 Entering Blast Passive Mode (127,0,0,1,156,65) Id=00000000000000ff\n\
         350 Restart Marker OK.\n\
         150 Opening BLAST data channel for RETR /f (Size=5000;Packet=1436;).\n",
    );
    assert!(matches!(&h.events()[..], [Event::TransferStarted(r)] if r.code == 150));
    assert_eq!(h.now - begin, rtt, "one round trip to the 150");
    let ch = h.s.blast_channel().unwrap();
    assert_eq!((ch.transfer_id, ch.size), (0xff, 5000));
    h.reply("226 Transfer complete.\n");
    assert!(matches!(
        &h.events()[..],
        [Event::Done(Outcome::Transferred(_))]
    ));

    // Upload: ALLO rides in the same batch (TYPE I is known by now).
    h.start(Op::Transfer(blast(Direction::Upload, "/in/f")));
    assert_eq!(h.events(), vec![Event::BlastBind]);
    h.s.handle_blast_bound(h.now, "127.0.0.1:40002".parse().unwrap());
    assert_eq!(
        h.sent(),
        [
            "OPTS BLAST MTU=1500;Rate=0;Start=180000000;",
            "BPAS 127,0,0,1,156,66",
            "ALLO 5000",
            "STOR /in/f",
        ]
    );
}

/// A refused `BPAS` (bounce protection) fails the operation; the replies still due to the commands pipelined
/// behind it (the server answers RETR with `425`: no channel) are swallowed, not taken by the next operation.
#[test]
fn refused_bpas_swallows_the_pipelined_retr() {
    let mut h = H::login(BLAST_DRSFTP_FEAT);
    h.start(Op::Transfer(blast(Direction::Download, "/f")));
    h.events();
    h.s.handle_blast_bound(h.now, "127.0.0.1:40000".parse().unwrap());
    assert_eq!(h.sent().len(), 4);
    h.reply("200 Type set to I.\n200 OPTS BLAST MTU=1500;Rate=0;\n504 Bad address.\n");
    assert!(matches!(&h.events()[..], [Event::Failed(e)] if e.reply_code() == Some(504)));
    h.size_after("425 Use BPAS or PASV first.\n");
}

/// Any other server still gets the blast set-up one command at a time (the socket is bound first there too).
#[test]
fn blast_setup_with_a_server_that_does_not_pipeline() {
    let mut h = H::login("211-Extensions supported:\n SIZE\n PARALLEL\n BLAST\n211 End.\n");
    h.start(Op::Transfer(blast(Direction::Download, "/f")));
    assert_eq!(h.events(), vec![Event::BlastBind]);
    h.s.handle_blast_bound(h.now, "127.0.0.1:40000".parse().unwrap());
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect(
        "OPTS BLAST MTU=1500;Rate=0;Start=180000000;",
        "200 OPTS BLAST MTU=1500;Rate=0;\n",
    );
    h.expect(
        "BPAS 127,0,0,1,156,64",
        "229 Entering Blast Passive Mode (127,0,0,1,156,65) Id=1\n",
    );
    h.expect(
        "RETR /f",
        "150 Opening BLAST data channel for RETR /f (Size=5000;Packet=1436;).\n",
    );
}

/// A download with the whole file's CKSM asked for behind RETR, up to the batch that carries them.
fn download_with_trailing_cksm(h: &mut H) {
    h.s.set_trailing_checksum("CRC32C");
    h.start_download(true);
    h.batch(&SETUP, "200 ok\n200 ok\n200 DRS Inband=1;\n200 ok\n");
    h.listen();
    assert_eq!(
        h.sent(),
        [
            "PORT 127,0,0,1,235,41",
            "RETR /data/f",
            "CKSM CRC32C 0 -1 /data/f"
        ],
        "the final check rides behind RETR"
    );
}

#[test]
fn the_final_cksm_rides_behind_retr_and_completes_the_report() {
    let mut h = H::login(DRSFTP_FEAT);
    download_with_trailing_cksm(&mut h);
    h.reply("200 PORT Command successful.\n125 Go.\n");
    assert!(matches!(&h.events()[..], [Event::TransferStarted(_)]));
    // The transfer is the head of the queue while it runs: SBUF still works.
    h.s.send_sbuf(h.now, 1, 65536).unwrap();
    h.sent();
    h.reply("200 SBUF 1 65536\n226 Transfer complete.\n");
    let ev = h.events();
    assert!(
        !ev.iter().any(|e| matches!(e, Event::Done(_))),
        "done only with the CKSM: {ev:?}"
    );
    assert!(h.deadline_armed(), "the CKSM has a reply deadline");
    assert_eq!(h.s.send_sbuf(h.now, 2, 1), Err(ClientError::NoTransfer));
    h.reply("213 0A1B2C3D\n");
    let rep = h.report();
    assert_eq!(rep.final_reply.unwrap().code, 226);
    assert_eq!(rep.checksum, Some(Box::new(Ok("0a1b2c3d".into()))));
    assert!(!h.s.is_busy());
    // Used once: the next download has no CKSM behind it.
    h.start_download(true);
    h.batch(&["OPTS RETR Parallelism=4,4,4;"], "200 ok\n");
    h.listen();
    assert_eq!(h.sent(), ["PORT 127,0,0,1,235,41", "RETR /data/f"]);
}

#[test]
fn a_refused_final_cksm_is_reported_not_fatal() {
    let mut h = H::login(DRSFTP_FEAT);
    download_with_trailing_cksm(&mut h);
    h.reply("200 PORT Command successful.\n125 Go.\n226 Transfer complete.\n504 Not here.\n");
    let rep = h.report();
    assert!(matches!(rep.checksum.as_deref(), Some(Err(r)) if r.code == 504));
}

#[test]
fn a_refused_retr_swallows_the_cksm_behind_it() {
    let mut h = H::login(DRSFTP_FEAT);
    download_with_trailing_cksm(&mut h);
    h.reply("200 PORT Command successful.\n550 No such file.\n");
    assert!(
        matches!(&h.events()[..], [Event::Failed(ClientError::Refused { reply, .. })] if reply.code == 550)
    );
    h.size_after("550 No such file.\n");
}

#[test]
fn abort_with_a_cksm_behind_the_transfer_swallows_its_late_reply() {
    let mut h = H::login(DRSFTP_FEAT);
    download_with_trailing_cksm(&mut h);
    h.reply("200 PORT Command successful.\n150 Opening.\n");
    h.events();
    h.s.abort(h.now);
    assert_eq!(h.sent(), ["ABOR"]);
    // ABOR jumps the server's queue: the transfer's 426 and ABOR's 226 come first, the CKSM's reply after.
    h.reply("426 Transfer aborted.\n226 Abort successful.\n");
    assert_eq!(h.events(), vec![Event::Failed(ClientError::Aborted)]);
    h.size_after("213 0a1b2c3d\n");
}

#[test]
fn other_servers_get_no_cksm_behind_the_transfer() {
    let mut h = H::login(GLOBUS_FEAT);
    h.s.set_trailing_checksum("CRC32C");
    h.start_download(false);
    let mut all = vec![];
    for _ in 0..8 {
        let sent = h.sent();
        if sent.is_empty() {
            break;
        }
        all.extend(sent);
        h.reply("200 ok\n");
        if h.events().contains(&Event::Listen) {
            h.s.handle_listening(h.now, "127.0.0.1:60201".parse().unwrap());
        }
    }
    assert!(all.iter().any(|c| c.starts_with("RETR")), "{all:?}");
    assert!(!all.iter().any(|c| c.starts_with("CKSM")), "{all:?}");
}

#[test]
fn a_late_sbuf_refusal_comes_after_the_trailing_cksm() {
    let mut h = H::login(DRSFTP_FEAT);
    download_with_trailing_cksm(&mut h);
    h.reply("200 PORT Command successful.\n125 Go.\n");
    h.events();
    // SBUF sent while the transfer runs; the server has already finished it, so the SBUF waits in its queue
    // behind the CKSM: 226, then the CKSM's 213, then the refusal.
    h.s.send_sbuf(h.now, 1, 65536).unwrap();
    h.sent();
    h.reply("226 Transfer complete.\n213 0a1b2c3d\n");
    let rep = h.report();
    assert_eq!(rep.checksum, Some(Box::new(Ok("0a1b2c3d".into()))));
    h.reply("503 SBUF <id> <size> needs a running transfer.\n");
    assert!(
        matches!(&h.events()[..], [Event::Notice(n)] if n.contains("SBUF 1")),
        "the refusal answers the SBUF"
    );
    h.size_after("");
}

/// first22c: a `--transport auto` download asks for the final CKSM only once its rule said "stay on TCP", while
/// the RETR already runs. It rides behind the transfer as if it had gone with RETR: no deadline while the data
/// moves, the `226` does not end the operation, the `213` does and fills the report.
#[test]
fn a_cksm_asked_while_the_retr_runs_completes_the_report() {
    let mut h = H::login(DRSFTP_FEAT);
    h.start_download(true);
    h.batch(&SETUP, "200 ok\n200 ok\n200 DRS Inband=1;\n200 ok\n");
    h.listen();
    assert_eq!(h.sent(), ["PORT 127,0,0,1,235,41", "RETR /data/f"]);
    h.reply("200 PORT Command successful.\n125 Go.\n");
    assert!(matches!(&h.events()[..], [Event::TransferStarted(_)]));
    assert!(h.s.pipeline_trailing_checksum(h.now, "CRC32C"));
    assert_eq!(h.sent(), ["CKSM CRC32C 0 -1 /data/f"]);
    assert_eq!(
        h.s.poll_timeout(),
        None,
        "the transfer still has no deadline"
    );
    assert!(
        !h.s.pipeline_trailing_checksum(h.now, "CRC32C"),
        "asked once"
    );
    assert_eq!(h.sent(), Vec::<String>::new());
    h.reply("226 Transfer complete.\n");
    let ev = h.events();
    assert!(
        !ev.iter().any(|e| matches!(e, Event::Done(_))),
        "done only with the CKSM: {ev:?}"
    );
    assert!(h.deadline_armed(), "the CKSM has a reply deadline");
    h.reply("213 0A1B2C3D\n");
    let rep = h.report();
    assert_eq!(rep.final_reply.unwrap().code, 226);
    assert_eq!(rep.checksum, Some(Box::new(Ok("0a1b2c3d".into()))));
    assert!(!h.s.is_busy());
    assert!(
        !h.s.pipeline_trailing_checksum(h.now, "CRC32C"),
        "no transfer running"
    );
}

/// A CKSM asked mid-transfer and then left behind a pipelined ABOR (the rule switched after all) is kept as the
/// late checksum, like one sent with RETR.
#[test]
fn a_cksm_asked_mid_transfer_survives_a_pipelined_abort() {
    let mut h = H::login(DRSFTP_FEAT);
    h.start_download(true);
    h.batch(&SETUP, "200 ok\n200 ok\n200 DRS Inband=1;\n200 ok\n");
    h.listen();
    h.sent();
    h.reply("200 PORT Command successful.\n125 Go.\n");
    h.events();
    assert!(h.s.pipeline_trailing_checksum(h.now, "CRC32C"));
    h.sent();
    assert!(h.s.abort_and_go_on(h.now));
    assert_eq!(h.sent(), ["ABOR"]);
    assert_eq!(h.events(), vec![Event::Failed(ClientError::Aborted)]);
    h.reply("426 Transfer aborted.\n226 Abort successful.\n213 0a1b2c3d\n");
    assert_eq!(
        h.s.take_late_checksum(),
        Some(("CKSM CRC32C 0 -1 /data/f".into(), "0a1b2c3d".into()))
    );
}

/// Servers that do not pipeline (Globus) get no CKSM sent into a running transfer.
#[test]
fn other_servers_get_no_cksm_mid_transfer() {
    let mut h = H::login(GLOBUS_FEAT);
    h.start_download(false);
    assert!(!h.s.pipeline_trailing_checksum(h.now, "CRC32C"));
}

/// first22c: a blast download's final CKSM rides behind its RETR in the set-up batch (a drsftp server hashes the
/// file while blast sends it); the `226` does not end the operation, the `213` does. A blast upload takes none.
#[test]
fn a_blast_download_carries_the_final_cksm_behind_retr() {
    let mut h = H::login(BLAST_DRSFTP_FEAT);
    h.s.set_trailing_checksum("CRC32C");
    h.start(Op::Transfer(blast(Direction::Download, "/f")));
    assert_eq!(h.events(), vec![Event::BlastBind]);
    h.s.handle_blast_bound(h.now, "127.0.0.1:40000".parse().unwrap());
    assert_eq!(
        h.sent(),
        [
            "TYPE I",
            "OPTS BLAST MTU=1500;Rate=0;Start=180000000;",
            "BPAS 127,0,0,1,156,64",
            "RETR /f",
            "CKSM CRC32C 0 -1 /f",
        ]
    );
    h.reply(
        "200 Type set to I.\n200 OPTS BLAST MTU=1500;Rate=0;Start=180000000;\n\
         229 Entering Blast Passive Mode (127,0,0,1,156,65) Id=00000000000000ff\n\
         150 Opening BLAST data channel for RETR /f (Size=5000;Packet=1436;).\n",
    );
    assert!(matches!(&h.events()[..], [Event::TransferStarted(_)]));
    h.reply("226 Transfer complete.\n");
    assert!(!h.events().iter().any(|e| matches!(e, Event::Done(_))));
    h.reply("213 00aa11bb\n");
    let rep = h.report();
    assert_eq!(rep.checksum, Some(Box::new(Ok("00aa11bb".into()))));
    assert!(rep.blast.is_some(), "the channel is still described");

    h.s.set_trailing_checksum("CRC32C");
    h.start(Op::Transfer(blast(Direction::Upload, "/in/f")));
    h.events();
    h.s.handle_blast_bound(h.now, "127.0.0.1:40002".parse().unwrap());
    let sent = h.sent();
    assert!(!sent.iter().any(|c| c.starts_with("CKSM")), "{sent:?}");
}

/// PORT and RETR left with the set-up (the driver listened at once); then MODE E is refused: the operation fails
/// on that reply, and the replies still due to OPTS, PORT and RETR (a RETR the server may even start, and fail
/// for want of a data connection) are swallowed, never taken for the next operation's.
#[test]
fn a_refused_mode_swallows_the_port_and_retr_sent_with_the_set_up() {
    let mut h = H::login(DRSFTP_FEAT);
    h.start_download(true);
    assert_eq!(h.sent(), SETUP);
    assert_eq!(h.events(), vec![Event::Listen]);
    h.s.handle_listening(h.now, "127.0.0.1:60201".parse().unwrap());
    assert_eq!(h.sent(), ["PORT 127,0,0,1,235,41", "RETR /data/f"]);
    h.reply("200 Type set to I.\n504 Command not implemented for that parameter.\n");
    assert!(
        matches!(&h.events()[..], [Event::Failed(e)] if e.reply_code() == Some(504)),
        "fails on the refusal, not later"
    );
    h.size_after(
        "200 DRS Inband=1;\n200 OPTS Command Successful.\n200 PORT Command successful.\n\
         150 Opening.\n425 Can't open data connection.\n",
    );
}
