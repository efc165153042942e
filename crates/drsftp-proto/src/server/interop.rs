//! Interop tests: our own sans-IO client session talks to the server session in-process, with a fake server
//! driver running filesystem requests on `MemStorage` and pretending to move the data. This checks that every
//! reply the server forms (227, 125/150, 111/112 markers, 213, FEAT) is understood by the client that
//! `drsftp copy` uses.

// Single-range plans are lists of ranges.
#![allow(clippy::single_range_in_vec_init)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use drsftp_storage::{checksum, MemStorage, Storage, WriteMode};

use super::*;
use crate::client::{
    ClientConfig, ClientSession, Direction, Event, ListKind, Op, Outcome, Partial, TransferMode,
    TransferSpec,
};

fn run_fs(st: &MemStorage, req: FsRequest) -> FsResult {
    let r = match req {
        FsRequest::Stat(p) => st.stat(&p).map(FsResult::Stat),
        FsRequest::List(p) => st.list(&p).map(FsResult::List),
        FsRequest::Mkdir(p) => st.mkdir(&p).map(|_| FsResult::Done),
        FsRequest::Rmdir(p) => st.rmdir(&p).map(|_| FsResult::Done),
        FsRequest::Remove(p) => st.remove(&p).map(|_| FsResult::Done),
        FsRequest::Rename { from, to } => st.rename(&from, &to).map(|_| FsResult::Done),
        FsRequest::SetModified { path, time } => {
            st.set_modified(&path, time).map(|_| FsResult::Done)
        }
        FsRequest::Checksum {
            alg,
            path,
            offset,
            length,
        } => st
            .open_read(&path)
            .and_then(|f| checksum(&*f, alg, offset, length))
            .map(FsResult::Checksum),
        FsRequest::KeptHeld(k) => st.kept_held(&k.id, &k.limits).map(FsResult::Kept),
        // The transfer the fake driver runs opens the file again; this one only says it can be.
        FsRequest::OpenWrite { path, write_mode } => {
            st.open_write(&path, write_mode).map(|_| FsResult::Done)
        }
    };
    r.unwrap_or_else(FsResult::Err)
}

struct Pair {
    c: ClientSession,
    s: ServerSession,
    st: MemStorage,
    now: Instant,
    plans: Vec<TransferPlan>,
    /// The bytes of each streamed directory listing, as the driver would send them.
    listings: Vec<Vec<u8>>,
    events: Vec<Event>,
    /// Bytes the fake client "uploads".
    upload: Vec<u8>,
    /// The control dialogue: `C: line` / `S: line`.
    log: Vec<String>,
}

impl Pair {
    fn new() -> Self {
        let now = Instant::now();
        let mut c = ClientSession::new(ClientConfig::default(), now);
        c.set_peer_ip("127.0.0.1".parse().unwrap());
        let local: SocketAddr = "127.0.0.1:2811".parse().unwrap();
        let peer: SocketAddr = "127.0.0.1:50000".parse().unwrap();
        // The clients upload anonymously.
        let cfg = ServerConfig {
            anonymous_write: true,
            ..ServerConfig::default()
        };
        let mut s = ServerSession::new(now, cfg, local, peer);
        s.set_epoch(now, 1_795_359_163.0);
        let st = MemStorage::new();
        st.put(
            "/tmp/src/f",
            (0..100_000u32).map(|i| i as u8).collect::<Vec<u8>>(),
        );
        st.mkdir("/tmp/dst").unwrap();
        let mut p = Pair {
            c,
            s,
            st,
            now,
            plans: vec![],
            listings: vec![],
            events: vec![],
            upload: b"uploaded bytes".repeat(100),
            log: vec![],
        };
        p.pump();
        p
    }

    /// Moves bytes and actions until both sides are quiet.
    fn pump(&mut self) {
        loop {
            let mut busy = false;
            while let Some(b) = self.s.poll_transmit() {
                let text = String::from_utf8_lossy(&b);
                self.log.extend(text.lines().map(|l| format!("S: {l}")));
                self.c.handle_input(self.now, &b);
                busy = true;
            }
            while let Some(b) = self.c.poll_transmit() {
                let text = String::from_utf8_lossy(&b);
                self.log.extend(text.lines().map(|l| format!("C: {l}")));
                self.s.handle_input(self.now, &b);
                busy = true;
            }
            while let Some(a) = self.s.poll_action() {
                busy = true;
                self.server_action(a);
            }
            while let Some(e) = self.c.poll_event() {
                busy = true;
                match &e {
                    Event::Listen => self
                        .c
                        .handle_listening(self.now, "127.0.0.1:60201".parse().unwrap()),
                    Event::Connect { .. } => self.c.handle_data_ready(self.now),
                    Event::BlastBind => self
                        .c
                        .handle_blast_bound(self.now, "127.0.0.1:40200".parse().unwrap()),
                    _ => {}
                }
                self.events.push(e);
            }
            if !busy {
                return;
            }
        }
    }

    fn server_action(&mut self, a: Action) {
        match a {
            // Anonymous logins never reach the driver; any other user is refused here.
            Action::CheckLogin { .. } => self.s.handle_login(self.now, LoginVerdict::Denied),
            Action::Fs(req) => {
                let r = run_fs(&self.st, req);
                self.s.handle_fs(self.now, r);
            }
            Action::Listen { ip, count } => {
                let addrs = (0..count as u16)
                    .map(|i| SocketAddr::new(ip, 40000 + i))
                    .collect();
                self.s.handle_listening(self.now, Ok(addrs));
            }
            Action::Transfer(plan) => {
                let id = plan.id;
                let (bytes, ranges) = match &plan.payload {
                    Payload::SendFile { path, ranges, .. } => {
                        assert!(self.st.stat(path).is_ok());
                        (ranges.iter().map(|r| r.end - r.start).sum(), ranges.clone())
                    }
                    Payload::SendBytes(b) => (b.len() as u64, vec![0..b.len() as u64]),
                    Payload::SendListing { path, format } => {
                        let mut b = vec![];
                        self.st
                            .list_each(path, &mut |m| {
                                format.push_line(&m, &mut b);
                                true
                            })
                            .unwrap();
                        let n = b.len() as u64;
                        self.listings.push(b);
                        (n, vec![0..n])
                    }
                    Payload::RecvFile {
                        path,
                        write_mode,
                        offset,
                        ..
                    } => {
                        let part = self.st.open_write(path, *write_mode).unwrap();
                        part.handle().write_at(&self.upload, *offset).unwrap();
                        part.commit().unwrap();
                        let n = self.upload.len() as u64;
                        (n, vec![*offset..*offset + n])
                    }
                };
                self.plans.push(plan);
                // Halfway: a progress report and a marker tick; then the end.
                self.s.handle_progress(
                    self.now,
                    TransferProgress {
                        bytes,
                        ranges: ranges.into_iter().collect(),
                        stripes: vec![],
                    },
                );
                self.now += Duration::from_secs(5);
                if self.s.poll_timeout().is_some_and(|t| t <= self.now) {
                    self.s.handle_timeout(self.now);
                }
                self.s
                    .handle_transfer_done(self.now, id, TransferResult::Ok { bytes, streams: 1 });
            }
            Action::BlastBind { ip } => self
                .s
                .handle_blast_bound(self.now, Ok((SocketAddr::new(ip, 40100), 0xfeed_f00d))),
            Action::Abort | Action::SetBuffer { .. } | Action::Prefetch(_) => {}
            Action::Close | Action::StartTls => {}
        }
    }

    fn op(&mut self, op: Op) -> Outcome {
        self.events.clear();
        self.c.start(self.now, op).unwrap();
        self.pump();
        match self.events.iter().find_map(|e| match e {
            Event::Done(o) => Some(Ok(o.clone())),
            Event::Failed(f) => Some(Err(f.clone())),
            _ => None,
        }) {
            Some(Ok(o)) => o,
            other => panic!(
                "operation did not finish: {other:?}; events {:?}",
                self.events
            ),
        }
    }
}

fn spec(direction: Direction, path: &str, mode: TransferMode, streams: u32) -> TransferSpec {
    TransferSpec {
        direction,
        path: path.into(),
        mode,
        streams,
        streams_range: None,
        tcp_buffer: Some(4 << 20),
        partial: None,
        alloc: None,
        drs: false,
        transport: Default::default(),
        stripes: false,
    }
}

#[test]
fn our_client_against_our_server() {
    let mut p = Pair::new();
    let login = p.op(Op::Login {
        user: "anonymous".into(),
        pass: "drsftp@".into(),
    });
    let Outcome::LoggedIn(f) = login else {
        panic!("{login:?}")
    };
    assert!(f.parallel() && f.has("ERET") && f.has("ESTO") && f.has("SPAS"));
    assert_eq!(f.verify_algorithm(), Some("CRC32C"));
    assert_eq!(p.op(Op::Size("/tmp/src/f".into())), Outcome::Size(100_000));

    // MODE E download, 4 streams: the client listens (PORT), the server connects.
    let spec4 = spec(Direction::Download, "/tmp/src/f", TransferMode::Extended, 4);
    let Outcome::Transferred(rep) = p.op(Op::Transfer(spec4)) else {
        panic!()
    };
    assert!(rep.parallelism_accepted);
    assert_eq!(
        rep.buffer_command.as_deref(),
        Some("SITE RETRBUFSIZE 4194304")
    );
    let plan = p.plans.last().unwrap();
    assert_eq!((plan.mode, plan.parallelism), (Mode::Extended, 4));
    assert_eq!(plan.tcp_buffer, Some(4 << 20));
    assert_eq!(
        plan.endpoint,
        DataEndpoint::Active(vec!["127.0.0.1:60201".parse().unwrap()])
    );

    // Partial download (ERET) in stream mode over PASV.
    let mut part = spec(Direction::Download, "/tmp/src/f", TransferMode::Stream, 1);
    part.partial = Some(Partial {
        offset: 1000,
        length: 5000,
    });
    assert!(matches!(p.op(Op::Transfer(part)), Outcome::Transferred(_)));
    let plan = p.plans.last().unwrap();
    assert_eq!(plan.endpoint, DataEndpoint::Passive);
    assert!(matches!(
        &plan.payload,
        Payload::SendFile { ranges, wire_sub: 1000, .. } if *ranges == vec![1000..6000]
    ));

    // MODE E upload: the client sees our perf and range markers.
    let mut up = spec(Direction::Upload, "/tmp/dst/u", TransferMode::Extended, 2);
    up.alloc = Some(p.upload.len() as u64);
    let Outcome::Transferred(rep) = p.op(Op::Transfer(up)) else {
        panic!()
    };
    let n = p.upload.len() as u64;
    assert_eq!(rep.ranges, vec![0..n]);
    let perf = rep.last_perf.unwrap();
    assert_eq!((perf.stripe_bytes, perf.stripe_count), (n, 1));
    assert!(perf.timestamp >= 1_795_359_163.0);
    assert_eq!(p.st.get("/tmp/dst/u").unwrap(), p.upload);
    assert!(matches!(
        p.plans.last().unwrap().payload,
        Payload::RecvFile {
            write_mode: WriteMode::Replace,
            ..
        }
    ));

    // Listing and checksum.
    let listed = p.op(Op::List {
        path: "/tmp/src".into(),
        kind: ListKind::Mlsd,
    });
    assert!(matches!(listed, Outcome::Listed(r) if r.code == 226));
    assert!(matches!(
        &p.plans.last().unwrap().payload,
        Payload::SendListing { path, .. } if path == "/tmp/src"
    ));
    let listing = String::from_utf8_lossy(p.listings.last().unwrap()).into_owned();
    assert!(listing.contains("type=file;size=100000;"), "{listing}");
    let sum = p.op(Op::Checksum {
        algorithm: "ADLER32".into(),
        offset: 0,
        length: None,
        path: "/tmp/dst/u".into(),
    });
    let Outcome::Checksum(hex) = sum else {
        panic!("{sum:?}")
    };
    assert_eq!(hex.len(), 8);
    assert_eq!(p.op(Op::Quit), Outcome::Closed);
    assert!(p.s.is_closed());
}

/// Our client against our server over blast: the set-up goes out in one batch (all client lines before the first
/// server line: one round trip to the `150`, issue 22) and the start rate reaches the server's sender.
#[test]
fn blast_dialogue_against_our_server() {
    use crate::client::{BlastRequest, Transport};
    let mut p = Pair::new();
    p.op(Op::Login {
        user: "anonymous".into(),
        pass: "drsftp@".into(),
    });
    assert!(p.c.features().has("BLAST"));
    let req = BlastRequest {
        mtu: 1500,
        max_rate: 0,
        ack_every: None,
        start_rate: 180_000_000,
    };
    let mut down = spec(Direction::Download, "/tmp/src/f", TransferMode::Stream, 1);
    down.transport = Transport::Blast(req);
    p.log.clear();
    let Outcome::Transferred(rep) = p.op(Op::Transfer(down)) else {
        panic!()
    };
    assert_eq!(
        p.log,
        [
            "C: TYPE I",
            "C: OPTS BLAST MTU=1500;Rate=0;Start=180000000;",
            "C: BPAS 127,0,0,1,157,8",
            "C: RETR /tmp/src/f",
            "S: 200 Type set to I.",
            "S: 200 OPTS BLAST MTU=1500;Rate=0;Start=180000000;",
            "S: 229 Entering Blast Passive Mode (127,0,0,1,156,164) Id=00000000feedf00d",
            "S: 150 Opening BLAST data channel for RETR /tmp/src/f (Size=100000;Packet=1436;).",
            "S: 226 Transfer complete.",
        ]
    );
    let ch = rep.blast.unwrap();
    assert_eq!(ch.peer, "127.0.0.1:40100".parse().unwrap());
    assert_eq!(
        (ch.transfer_id, ch.size, ch.payload_size),
        (0xfeed_f00d, 100_000, 1436)
    );
    let DataEndpoint::Blast(ep) = p.plans.last().unwrap().endpoint else {
        panic!()
    };
    assert_eq!(ep.peer, "127.0.0.1:40200".parse().unwrap());
    assert_eq!(ep.transfer_id, ch.transfer_id);
    assert_eq!(
        ep.start_rate, 180_000_000,
        "the server's sender starts there"
    );

    let mut up = spec(Direction::Upload, "/tmp/dst/b", TransferMode::Stream, 1);
    up.transport = Transport::Blast(BlastRequest {
        mtu: 9000,
        max_rate: 300_000_000,
        ack_every: Some(100),
        start_rate: 0,
    });
    up.alloc = Some(p.upload.len() as u64);
    p.log.clear();
    let Outcome::Transferred(rep) = p.op(Op::Transfer(up)) else {
        panic!()
    };
    assert_eq!(
        p.log,
        [
            "C: OPTS BLAST MTU=9000;Rate=300000000;AckEvery=100;",
            "C: BPAS 127,0,0,1,157,8",
            "C: ALLO 1400",
            "C: STOR /tmp/dst/b",
            "S: 200 OPTS BLAST MTU=9000;Rate=300000000;AckEvery=100;",
            "S: 229 Entering Blast Passive Mode (127,0,0,1,156,164) Id=00000000feedf00d",
            "S: 200 ALLO command successful.",
            "S: 150 Opening BLAST data channel for STOR /tmp/dst/b (Size=1400;Packet=8936;).",
            "S: 226 Transfer complete.",
        ]
    );
    assert_eq!(rep.blast.unwrap().max_rate, 300_000_000);
    assert_eq!(p.st.get("/tmp/dst/b").unwrap(), p.upload);
}
