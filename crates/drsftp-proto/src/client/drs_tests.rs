//! DRS negotiation tests for the client session: scripted Globus and drsftp servers (a Globus server never sees
//! `OPTS DRS`, a drsftp one gets it once), in-transfer `SBUF <id> <size>` with its `200 SBUF` echo or late
//! refusal, `126 SBUF` notices, and one live dialogue against our own `ServerSession`.

use std::net::SocketAddr;
use std::time::{Duration, Instant, UNIX_EPOCH};

use super::*;
use crate::server::{
    Action, FsRequest, FsResult, Mode, ServerConfig, ServerSession, TransferPlan, TransferResult,
};

use super::script_tests::{tcp_spec, Scripted, DRSFTP_FEAT, GLOBUS_FEAT};

fn spec(direction: Direction, mode: TransferMode, streams: u32, drs: bool) -> TransferSpec {
    TransferSpec {
        drs,
        ..tcp_spec(direction, "/data/f", mode, streams)
    }
}

#[test]
fn globus_server_never_sees_opts_drs() {
    let mut h = Scripted::login(GLOBUS_FEAT);
    assert!(!h.s.features().drs());
    let sp = spec(Direction::Download, TransferMode::Extended, 4, true);
    h.start(Op::Transfer(sp));
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect("MODE E", "200 Mode set to E.\n");
    h.expect(
        "OPTS RETR Parallelism=4,4,4;",
        "200 OPTS Command Successful.\n",
    );
    assert_eq!(h.events(), vec![Event::Listen]);
    h.s.handle_listening(h.now, "127.0.0.1:60201".parse().unwrap());
    h.expect("PORT 127,0,0,1,235,41", "200 PORT Command successful.\n");
    h.expect("RETR /data/f", "150 Beginning transfer.\n");
    assert!(!h.s.drs_negotiated());
    assert_eq!(
        h.s.send_sbuf(h.now, 1, 65536),
        Err(ClientError::DrsNotNegotiated)
    );
    assert_eq!(h.sent_one(), None, "no SBUF <id> <size> to a Globus server");
    // A stray 126 SBUF is ignored without opt-in; a Globus stripe-count 126 is still read.
    h.reply("126 SBUF 1 65536\n126 1 4\n226 Transfer Complete.\n");
    let ev = h.events();
    assert!(matches!(ev[1], Event::StripeCounts(_)), "{ev:?}");
    assert_eq!(ev.len(), 3, "{ev:?}");
    let Event::Done(Outcome::Transferred(rep)) = &ev[2] else {
        panic!("{ev:?}")
    };
    assert!(!rep.drs_negotiated);
    // Stream upload too: still nothing.
    h.start(Op::Transfer(spec(
        Direction::Upload,
        TransferMode::Stream,
        1,
        true,
    )));
    h.expect("MODE S", "200 Mode set to S.\n");
    assert_eq!(h.sent_one().as_deref(), Some("PASV"));
}

#[test]
fn drsftp_server_negotiates_once_and_off_again() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    assert!(h.s.features().drs());
    h.start(Op::Transfer(spec(
        Direction::Download,
        TransferMode::Extended,
        2,
        true,
    )));
    h.batch(
        &[
            "TYPE I",
            "MODE E",
            "OPTS DRS Inband=1;",
            "OPTS RETR Parallelism=2,2,2;",
        ],
        "200 Type set to I.\n200 Mode set to E.\n200 DRS Inband=1;\n200 OPTS Command Successful.\n",
    );
    assert_eq!(h.events(), vec![Event::Listen]);
    assert!(h.s.drs_negotiated(), "known before the transfer starts");
    h.s.handle_listening(h.now, "127.0.0.1:60201".parse().unwrap());
    h.batch(
        &["PORT 127,0,0,1,235,41", "RETR /data/f"],
        "200 PORT Command successful.\n125 Beginning transfer.\n226 Transfer complete.\n",
    );
    assert!(h.report().drs_negotiated);
    // Still on: not repeated.
    h.start(Op::Transfer(spec(
        Direction::Upload,
        TransferMode::Extended,
        2,
        true,
    )));
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,156,64)\n");
    h.events();
    h.s.handle_data_ready(h.now);
    h.expect("STOR /data/f", "125 Go.\n226 Transfer complete.\n");
    assert!(h.report().drs_negotiated);
    // A transfer that does not ask turns it off.
    h.start(Op::Transfer(spec(
        Direction::Upload,
        TransferMode::Extended,
        2,
        false,
    )));
    h.batch(
        &["OPTS DRS Inband=0;", "PASV"],
        "200 DRS Inband=0;\n227 Entering Passive Mode (127,0,0,1,156,64)\n",
    );
    h.events();
    h.s.handle_data_ready(h.now);
    h.expect("STOR /data/f", "125 Go.\n226 Transfer complete.\n");
    assert!(!h.report().drs_negotiated);
    assert!(!h.s.drs_negotiated());
}

#[test]
fn refused_opts_drs_is_a_notice() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.start(Op::Transfer(spec(
        Direction::Download,
        TransferMode::Stream,
        1,
        true,
    )));
    h.batch(
        &["TYPE I", "OPTS DRS Inband=1;", "PASV"],
        "200 Type set to I.\n500 OPTS failed.\n227 Entering Passive Mode (127,0,0,1,156,64)\n",
    );
    h.events();
    h.s.handle_data_ready(h.now);
    h.expect("RETR /data/f", "150 Opening.\n");
    assert_eq!(
        h.s.send_sbuf(h.now, 1, 1),
        Err(ClientError::DrsNotNegotiated)
    );
    h.reply("226 Transfer complete.\n");
    let rep = h.report();
    assert!(!rep.drs_negotiated);
    assert!(rep.notices[0].contains("OPTS DRS Inband=1;"), "{rep:?}");
}

/// Stream-mode download with DRS on, up to the running RETR.
fn stream_download_running(h: &mut Scripted) {
    h.start(Op::Transfer(spec(
        Direction::Download,
        TransferMode::Stream,
        1,
        true,
    )));
    h.batch(
        &["TYPE I", "OPTS DRS Inband=1;", "PASV"],
        "200 Type set to I.\n200 DRS Inband=1;\n227 Entering Passive Mode (127,0,0,1,156,64)\n",
    );
    h.events();
    h.s.handle_data_ready(h.now);
    h.expect("RETR /data/f", "150 Opening BINARY mode data connection.\n");
    h.events();
}

#[test]
fn sbuf_during_a_stream_download_is_echoed() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    assert_eq!(
        h.s.send_sbuf(h.now, 1, 1),
        Err(ClientError::DrsNotNegotiated)
    );
    stream_download_running(&mut h);
    h.s.send_sbuf(h.now, 1, 262144).unwrap();
    h.s.send_sbuf(h.now, 2, 524288).unwrap();
    assert_eq!(h.sent_one().as_deref(), Some("SBUF 1 262144"));
    assert_eq!(h.sent_one().as_deref(), Some("SBUF 2 524288"));
    assert_eq!(
        h.s.poll_timeout(),
        None,
        "echoes are informational: no deadline"
    );
    h.reply("200 SBUF 1 262144\n200 SBUF 2 262144\n");
    assert_eq!(
        h.events(),
        vec![
            Event::SbufEcho {
                id: 1,
                size: 262144
            },
            Event::SbufEcho {
                id: 2,
                size: 262144
            },
        ]
    );
    h.reply("226 Transfer complete.\n");
    assert!(h.report().drs_negotiated);
    assert_eq!(h.s.send_sbuf(h.now, 3, 1), Err(ClientError::NoTransfer));
}

#[test]
fn a_late_sbuf_refusal_does_not_confuse_the_next_command() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    stream_download_running(&mut h);
    h.s.send_sbuf(h.now, 7, 65536).unwrap();
    assert_eq!(h.sent_one().as_deref(), Some("SBUF 7 65536"));
    // The server had already finished: 226 first, then the refusal of SBUF.
    h.reply("226 Transfer complete.\n");
    assert!(matches!(
        h.events().last(),
        Some(Event::Done(Outcome::Transferred(_)))
    ));
    h.start(Op::Size("/data/f".into()));
    h.expect(
        "SIZE /data/f",
        "503 SBUF <id> <size> needs a running transfer.\n",
    );
    assert!(matches!(&h.events()[..], [Event::Notice(n)] if n.contains("SBUF 7")));
    h.reply("213 42\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Size(42))]);
}

#[test]
fn sbuf_notice_during_a_stream_upload() {
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.start(Op::Transfer(spec(
        Direction::Upload,
        TransferMode::Stream,
        1,
        true,
    )));
    h.batch(
        &["TYPE I", "OPTS DRS Inband=1;", "PASV"],
        "200 Type set to I.\n200 DRS Inband=1;\n227 Entering Passive Mode (127,0,0,1,156,64)\n",
    );
    h.events();
    h.s.handle_data_ready(h.now);
    h.expect("STOR /data/f", "150 Opening.\n126 SBUF 1 4194304\n");
    let ev = h.events();
    assert_eq!(
        ev[1..],
        [Event::SbufNotice {
            id: 1,
            size: 4194304
        }]
    );
    h.reply("126 SBUF 2 8388608\n226 Transfer complete.\n");
    let ev = h.events();
    assert_eq!(
        ev[0],
        Event::SbufNotice {
            id: 2,
            size: 8388608
        }
    );
    assert!(matches!(ev[1], Event::Done(_)));
}

/// Our client session against our server session, in process; transfers are finished by hand.
struct Live {
    c: ClientSession,
    s: ServerSession,
    now: Instant,
    /// `C: line` / `S: line`, as on the wire.
    wire: Vec<String>,
    events: Vec<Event>,
    plan: Option<TransferPlan>,
    /// `Action::SetBuffer` from the server session.
    set_buffer: Vec<(u64, u64)>,
}

impl Live {
    fn new() -> Self {
        let now = Instant::now();
        let mut c = ClientSession::new(ClientConfig::default(), now);
        c.set_peer_ip("127.0.0.1".parse().unwrap());
        let s = ServerSession::new(
            now,
            ServerConfig::default(),
            "127.0.0.1:2811".parse().unwrap(),
            "127.0.0.1:50000".parse().unwrap(),
        );
        let mut l = Live {
            c,
            s,
            now,
            wire: vec![],
            events: vec![],
            plan: None,
            set_buffer: vec![],
        };
        l.c.start(
            now,
            Op::Login {
                user: "anonymous".into(),
                pass: "x".into(),
            },
        )
        .unwrap();
        l.pump();
        l.wire.clear();
        l
    }

    fn log(&mut self, who: &str, bytes: &[u8]) {
        for line in String::from_utf8_lossy(bytes).lines() {
            self.wire.push(format!("{who}: {line}"));
        }
    }

    fn pump(&mut self) {
        loop {
            let mut busy = false;
            while let Some(b) = self.s.poll_transmit() {
                self.log("S", &b);
                self.c.handle_input(self.now, &b);
                busy = true;
            }
            while let Some(b) = self.c.poll_transmit() {
                self.log("C", &b);
                self.s.handle_input(self.now, &b);
                busy = true;
            }
            while let Some(a) = self.s.poll_action() {
                busy = true;
                match a {
                    Action::Fs(FsRequest::Stat(p)) => {
                        let m = drsftp_storage::Metadata {
                            name: p.rsplit('/').next().unwrap_or("").into(),
                            kind: drsftp_storage::EntryKind::File,
                            size: 1000,
                            modified: UNIX_EPOCH + Duration::from_secs(1_795_359_077),
                            mode: 0o644,
                        };
                        self.s.handle_fs(self.now, FsResult::Stat(m));
                    }
                    Action::Listen { ip, .. } => self
                        .s
                        .handle_listening(self.now, Ok(vec![SocketAddr::new(ip, 40000)])),
                    Action::Transfer(p) => self.plan = Some(p),
                    Action::SetBuffer { id, size } => self.set_buffer.push((id, size)),
                    other => panic!("unexpected {other:?}"),
                }
            }
            while let Some(e) = self.c.poll_event() {
                busy = true;
                match &e {
                    Event::Listen => self
                        .c
                        .handle_listening(self.now, "127.0.0.1:60201".parse().unwrap()),
                    Event::Connect { .. } => self.c.handle_data_ready(self.now),
                    _ => {}
                }
                self.events.push(e);
            }
            if !busy {
                return;
            }
        }
    }

    fn finish(&mut self) -> TransferReport {
        let id = self.plan.take().expect("a transfer runs").id;
        self.s.handle_transfer_done(
            self.now,
            id,
            TransferResult::Ok {
                bytes: 1000,
                streams: 1,
            },
        );
        self.pump();
        match self.events.last() {
            Some(Event::Done(Outcome::Transferred(r))) => r.clone(),
            _ => panic!("{:?}", self.events),
        }
    }
}

#[test]
fn live_negotiation_with_our_server() {
    let mut l = Live::new();
    assert!(l.c.features().drs());
    l.c.start(
        l.now,
        Op::Transfer(spec(Direction::Download, TransferMode::Extended, 2, true)),
    )
    .unwrap();
    l.pump();
    let plan = l.plan.clone().expect("transfer started");
    assert_eq!(plan.mode, Mode::Extended);
    assert!(
        plan.inband_drs,
        "the server tells its driver: in-band SBUF on"
    );
    assert!(l.c.drs_negotiated());
    assert!(l.finish().drs_negotiated);
    assert_eq!(
        l.wire,
        [
            // Pipelined: two round trips before data flows.
            "C: TYPE I",
            "C: MODE E",
            "C: OPTS DRS Inband=1;",
            "C: OPTS RETR Parallelism=2,2,2;",
            "S: 200 Type set to I.",
            "S: 200 Mode set to E.",
            "S: 200 DRS Inband=1;",
            "S: 200 OPTS Command Successful.",
            "C: PORT 127,0,0,1,235,41",
            "C: RETR /data/f",
            "S: 200 PORT Command successful.",
            "S: 125 Beginning MODE E transfer of RETR /data/f.",
            "S: 226 Transfer complete.",
        ]
    );
    // Stream download with control-channel SBUF: command, echo, SetBuffer for the server's driver.
    l.wire.clear();
    l.events.clear();
    l.c.start(
        l.now,
        Op::Transfer(spec(Direction::Download, TransferMode::Stream, 1, true)),
    )
    .unwrap();
    l.pump();
    assert!(
        !l.plan.as_ref().unwrap().inband_drs,
        "no descriptors in stream mode"
    );
    l.c.send_sbuf(l.now, 5, 131072).unwrap();
    l.pump();
    assert_eq!(l.set_buffer, [(5, 131072)], "the server's driver is told");
    assert!(l.events.contains(&Event::SbufEcho {
        id: 5,
        size: 131072
    }));
    assert!(l.finish().drs_negotiated);
    let tail: Vec<&str> = l.wire.iter().map(String::as_str).skip(6).collect();
    assert_eq!(
        tail,
        [
            "C: SBUF 5 131072",
            "S: 200 SBUF 5 131072",
            "S: 226 Transfer complete.",
        ],
        "{:?}",
        l.wire
    );
}

#[test]
fn live_two_argument_sbuf_is_refused_before_opt_in() {
    let mut l = Live::new();
    l.c.start(
        l.now,
        Op::Transfer(spec(Direction::Download, TransferMode::Stream, 1, false)),
    )
    .unwrap();
    l.pump();
    assert!(l.wire.iter().all(|w| !w.contains("DRS")), "{:?}", l.wire);
    assert!(!l.plan.as_ref().unwrap().inband_drs);
    // The client will not send it...
    assert_eq!(
        l.c.send_sbuf(l.now, 1, 65536),
        Err(ClientError::DrsNotNegotiated)
    );
    // ...and the server refuses it from a client that does so anyway.
    l.s.handle_input(l.now, b"SBUF 1 65536\r\n");
    let r = String::from_utf8(l.s.poll_transmit().unwrap()).unwrap();
    assert_eq!(
        r,
        "503 SBUF <id> <size> needs OPTS DRS Inband=1; first.\r\n"
    );
    l.pump();
    assert_eq!(l.set_buffer, [], "no SetBuffer");
    assert!(!l.finish().drs_negotiated);
}
