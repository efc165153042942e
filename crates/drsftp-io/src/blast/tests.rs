//! Loopback tests of the blast data path: whole transfers (SHA-256 equal), the rate cap, hostile datagrams injected
//! at both ends during a transfer (counted, file intact), cancellation, and the idle timeout.

#![allow(clippy::single_range_in_vec_init)]

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use drsftp_blast::{Batch, Sender, SenderConfig, TransferParams};
use drsftp_storage::{checksum, BytesFile, ChecksumAlg, FileHandle};

use super::*;

use drsftp_testkit::data::random_bytes;

fn sha(f: &dyn FileHandle) -> String {
    checksum(f, ChecksumAlg::Sha256, 0, None).unwrap()
}

fn lo() -> std::net::IpAddr {
    "127.0.0.1".parse().unwrap()
}

fn opts() -> BlastOpts {
    BlastOpts {
        idle_timeout: Duration::from_secs(20),
        linger: Duration::from_millis(300),
        ..BlastOpts::default()
    }
}

struct Run {
    tx: BlastReport,
    rx: BlastReport,
    out: Arc<BytesFile>,
    secs: f64,
}

/// Moves `src` (at file offset `base`) from a sender socket to a receiver socket on loopback; `during` runs
/// next to the transfer with the two addresses and the params.
async fn transfer(
    src: Vec<u8>,
    base: u64,
    mtu: usize,
    o: BlastOpts,
    during: impl FnOnce(SocketAddr, SocketAddr, TransferParams, Arc<AtomicBool>) + Send + 'static,
) -> Run {
    let len = src.len() as u64 - base;
    let params = TransferParams::for_mtu(random_id(), len, mtu).unwrap();
    let s = bind(lo(), 0, &o).unwrap();
    let r = bind(lo(), 0, &o).unwrap();
    let (sa, ra) = (s.local_addr().unwrap(), r.local_addr().unwrap());
    let file: Arc<dyn FileHandle> = Arc::new(BytesFile::new(src));
    let out = Arc::new(BytesFile::new(vec![]));
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let side = std::thread::spawn(move || during(sa, ra, params, d2));
    let t = Instant::now();
    let (a, b) = tokio::join!(
        send(s, ra, params, file, base, &o, Arc::new(Progress::new())),
        recv(
            r,
            sa,
            params,
            out.clone(),
            base,
            &o,
            Arc::new(Progress::new())
        ),
    );
    let secs = t.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    side.join().unwrap();
    let (rx, linger) = b.unwrap();
    drop(linger);
    Run {
        tx: a.unwrap(),
        rx,
        out,
        secs,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_transfer_is_exact() {
    let src = random_bytes(24 << 20, 7);
    let want = sha(&BytesFile::new(src[1000..].to_vec()));
    let r = transfer(src.clone(), 1000, 9000, opts(), |_, _, _, _| {}).await;
    let got = r.out.read_at(&mut [0u8; 0], 0).unwrap();
    assert_eq!(got, 0);
    let out = {
        let mut v = vec![0u8; src.len()];
        assert_eq!(r.out.read_at(&mut v, 0).unwrap(), src.len());
        v
    };
    assert!(
        out[..1000].iter().all(|&b| b == 0),
        "bytes before base untouched"
    );
    assert_eq!(sha(&BytesFile::new(out[1000..].to_vec())), want);
    assert_eq!(r.rx.bytes, src.len() as u64 - 1000);
    assert_eq!(r.rx.ranges.ranges(), &[1000..src.len() as u64]);
    assert_eq!(r.tx.bytes, r.rx.bytes);
    // Duplicates. Nothing on loopback duplicates a datagram, so every duplicate the receiver saw must be one of
    // the sender's retransmissions or hedge copies, and the datagram counts on both ends must add up exactly.
    // The ratio itself is scheduling-dependent here: one loss-timer expiry (a receiver or its ack descheduled
    // for longer than srtt + 4 rttvar + 60 ms on a loaded host) resends up to a whole in-flight window, whose
    // floor (4 x max_burst + initial_burst = 544 packets) is ~19 % of these 2817 packets, so a 3 % bound failed
    // whenever one stall hit (5-6 % duplicates, no socket drops). Duplicate ratios over real paths (<= 3 %
    // target) are measured in docs/bench/blast.md; here the bound is a sanity one against resend storms.
    let (tx, rx) = (&r.tx, &r.rx);
    assert_eq!(
        tx.datagrams,
        tx.packets + tx.resent + tx.hedge_copies,
        "{tx:?}"
    );
    assert_eq!(rx.datagrams, rx.packets + rx.duplicates, "{rx:?}");
    assert!(
        rx.duplicates <= tx.resent + tx.hedge_copies,
        "duplicates without retransmissions: rx {rx:?} tx {tx:?}"
    );
    assert!(
        rx.duplicate_ratio() < 0.25,
        "resend storm: rx {rx:?} tx {tx:?}"
    );
    assert_eq!(r.rx.rejected, 0);
    assert_eq!(r.rx.bitmap.len() as u64, r.rx.packets.div_ceil(8));
    // The section starts at 1000: neither end's CRC is one of the file from 0.
    assert_eq!((r.rx.crc32c, r.tx.crc32c), (None, None));
    eprintln!(
        "24 MiB over loopback in {:.2} s ({:.0} Mbit/s): tx {:?}",
        r.secs,
        r.rx.bytes as f64 * 8.0 / r.secs / 1e6,
        r.tx
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_cap_holds_and_small_files_work() {
    let o = BlastOpts {
        max_rate: 40_000_000,
        ..opts()
    };
    let r = transfer(random_bytes(5 << 20, 3), 0, 1500, o, |_, _, _, _| {}).await;
    let mbps = r.rx.bytes as f64 * 8.0 * 1500.0 / 1436.0 / r.secs / 1e6;
    assert!(mbps < 44.0, "{mbps:.1} Mbit/s with a 40 Mbit/s cap");
    assert!(mbps > 20.0, "{mbps:.1} Mbit/s: far below the cap");
    for n in [0usize, 1, 1435, 1436, 1437] {
        let src = random_bytes(n, 9);
        let r = transfer(src.clone(), 0, 1500, opts(), |_, _, _, _| {}).await;
        let mut v = vec![0u8; n];
        assert_eq!(r.out.read_at(&mut v, 0).unwrap(), n);
        assert_eq!(v, src, "{n} bytes");
        assert_eq!(r.rx.crc32c, Some(crc32c::crc32c(&src)), "{n} bytes");
        assert_eq!(r.tx.crc32c, Some(crc32c::crc32c(&src)), "{n} bytes");
    }
}

/// Valid datagrams of another transfer (or of ours, replayed) for the injector to send.
fn datagrams(params: TransferParams, src: &[u8], n: usize) -> Vec<Vec<u8>> {
    let now = Instant::now();
    let mut s = Sender::new(params, SenderConfig::default(), now).unwrap();
    let mut b = Batch::new();
    s.poll_transmit(now, n, src, &mut b).unwrap();
    b.iter().map(<[u8]>::to_vec).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_datagrams_are_counted_and_the_file_stays_exact() {
    let src = random_bytes(32 << 20, 11);
    let copy = src.clone();
    let o = BlastOpts {
        max_rate: 400_000_000,
        ..opts()
    };
    let counts = Arc::new(std::sync::Mutex::new([0u64; 6]));
    let c2 = counts.clone();
    let r = transfer(src.clone(), 0, 1500, o, move |sa, ra, params, done| {
        let same = UdpSocket::bind("127.0.0.1:0").unwrap();
        let other = UdpSocket::bind("127.0.0.2:0").ok();
        let replay = datagrams(params, &copy, 64);
        let foreign_id = datagrams(
            TransferParams {
                transfer_id: params.transfer_id ^ 1,
                ..params
            },
            &copy,
            8,
        );
        // Well-formed data packets with valid CRCs, numbered past the end of the transfer.
        let beyond: Vec<Vec<u8>> = (0..8u64)
            .map(|i| {
                let mut out = vec![];
                let pkt = drsftp_blast::wire::DataPacket {
                    seq: params.total_packets() + i,
                    tx: 0,
                    send_ts: 0,
                    ack_now: false,
                    payload: &copy[..params.payload_size],
                };
                drsftp_blast::wire::encode_data(&mut out, params.transfer_id, &pkt);
                out
            })
            .collect();
        let mut k = [0u64; 6];
        std::thread::sleep(Duration::from_millis(20));
        while !done.load(Ordering::Relaxed) {
            // 0 garbage, 1 truncated, 2 foreign transfer id, 3 out of range, 4 replay, 5 from another host
            let _ = same.send_to(&[0xde; 200], ra).map(|_| k[0] += 1);
            let t = &replay[k[1] as usize % replay.len()];
            let _ = same.send_to(&t[..t.len() / 2], ra).map(|_| k[1] += 1);
            let _ = same
                .send_to(&foreign_id[k[2] as usize % foreign_id.len()], ra)
                .map(|_| k[2] += 1);
            let _ = same
                .send_to(&beyond[k[3] as usize % beyond.len()], ra)
                .map(|_| k[3] += 1);
            let _ = same
                .send_to(&replay[k[4] as usize % replay.len()], ra)
                .map(|_| k[4] += 1);
            if let Some(o) = &other {
                let _ = o.send_to(&replay[0], ra).map(|_| k[5] += 1);
            }
            // Forged acks at the sender: garbage and a data packet.
            let _ = same.send_to(b"\xb1\xa5\x01\x02 not an ack", sa);
            let _ = same.send_to(&replay[0], sa);
            std::thread::sleep(Duration::from_micros(300));
        }
        *c2.lock().unwrap() = k;
    })
    .await;
    let k = *counts.lock().unwrap();
    eprintln!(
        "injected {k:?}; receiver {:?}; sender rejects {:?}",
        r.rx.rejects, r.tx.rejects
    );
    let mut v = vec![0u8; src.len()];
    assert_eq!(r.out.read_at(&mut v, 0).unwrap(), src.len());
    assert!(v == src, "file corrupted");
    assert!(
        k.iter().take(3).all(|&n| n > 10),
        "injector too slow: {k:?}"
    );
    let rj = r.rx.rejects;
    // Some injected datagrams may still sit in the socket when the transfer ends: at least 90 % counted.
    let at_least = |got: u64, sent: u64, what: &str| {
        assert!(
            got * 10 >= sent * 9 && got <= sent,
            "{what}: {got} of {sent}"
        )
    };
    at_least(rj.bad_magic, k[0], "garbage");
    at_least(rj.truncated + rj.bad_length + rj.bad_crc, k[1], "truncated");
    at_least(rj.wrong_transfer, k[2], "foreign transfer id");
    at_least(rj.seq_out_of_range, k[3], "out of range");
    if k[5] > 0 {
        at_least(r.rx.foreign, k[5], "other host");
    }
    assert!(r.rx.duplicates > 0, "replays count as duplicates");
    assert_eq!(r.rx.rejected, rj.total() + r.rx.foreign);
    assert!(
        r.tx.rejects.total() > 0,
        "forged acks at the sender are rejected"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aead_transfer_refuses_forgeries_that_pass_the_crc() {
    // Under PROT P both threads seal and open with the transfer's keys. An attacker who knows the transfer id
    // (it is in every datagram) forges cleartext data and acks with valid CRCs: cleartext blast would take them
    // (`hostile_datagrams_are_counted_and_the_file_stays_exact` counts them as duplicates); here they fail
    // authentication, are counted, and the file stays exact.
    let src = random_bytes(8 << 20, 12);
    let copy = src.clone();
    let o = BlastOpts {
        max_rate: 400_000_000,
        protection: drsftp_blast::Protection::Aead(drsftp_blast::KeyMaterial::new([9; 32])),
        ..opts()
    };
    let sent = Arc::new(std::sync::Mutex::new(0u64));
    let s2 = sent.clone();
    let r = transfer(src.clone(), 0, 1500, o, move |sa, ra, params, done| {
        let same = UdpSocket::bind("127.0.0.1:0").unwrap();
        let forged = datagrams(params, &copy, 64);
        let mut n = 0u64;
        std::thread::sleep(Duration::from_millis(20));
        while !done.load(Ordering::Relaxed) {
            let _ = same
                .send_to(&forged[n as usize % forged.len()], ra)
                .map(|_| n += 1);
            let _ = same.send_to(&forged[0], sa);
            std::thread::sleep(Duration::from_micros(300));
        }
        *s2.lock().unwrap() = n;
    })
    .await;
    let n = *sent.lock().unwrap();
    let mut v = vec![0u8; src.len()];
    assert_eq!(r.out.read_at(&mut v, 0).unwrap(), src.len());
    assert!(v == src, "file corrupted");
    assert!(r.rx.aead && r.tx.aead);
    assert!(n > 10, "injector too slow: {n}");
    let a = r.rx.rejects.auth_failed;
    assert!(a * 10 >= n * 9 && a <= n, "auth_failed {a} of {n} forged");
    assert_eq!(r.rx.rejects.total(), a);
    assert!(r.tx.rejects.auth_failed > 0, "forged acks at the sender");
    assert_eq!(r.rx.duplicates, 0, "no forgery counted as a duplicate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_thread_and_idle_times_out() {
    // A receiver with no sender: dropping its future ends the thread, which frees the port.
    let o = opts();
    let r = bind(lo(), 0, &o).unwrap();
    let port = r.local_addr().unwrap().port();
    let params = TransferParams::for_mtu(1, 1 << 20, 1500).unwrap();
    let out = Arc::new(BytesFile::new(vec![]));
    let fut = recv(
        r,
        "127.0.0.1:9".parse().unwrap(),
        params,
        out,
        0,
        &o,
        Arc::new(Progress::new()),
    );
    assert!(tokio::time::timeout(Duration::from_millis(100), fut)
        .await
        .is_err());
    let t = Instant::now();
    loop {
        if UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "thread still holds the socket"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // A sender whose receiver never answers gives up after idle_timeout.
    let o = BlastOpts {
        idle_timeout: Duration::from_millis(400),
        ..opts()
    };
    let s = bind(lo(), 0, &o).unwrap();
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let file: Arc<dyn FileHandle> = Arc::new(BytesFile::new(random_bytes(1 << 20, 1)));
    let t = Instant::now();
    let e = send(
        s,
        sink.local_addr().unwrap(),
        params,
        file,
        0,
        &o,
        Arc::new(Progress::new()),
    )
    .await
    .unwrap_err();
    // Never acknowledged at all: the clear "no receiver" error, not a bare timeout.
    assert!(e.to_string().contains("no acknowledgement"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(3));
}

/// Reflection: a blast aimed at a UDP port that is bound but never acknowledges (a victim's service). With the
/// default 60 s idle timeout the old sender paced 10 Mbit/s at it and resent every second (~74 MB before it gave
/// up); now it sends at most the unacked budget (512 KiB) and fails with a clear error after the first-ack
/// timeout (3 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_port_gets_at_most_the_unacked_budget() {
    silent_port_gets(opts_default_idle()).await;
}

/// The same with the fastest start a client can ask for (`OPTS BLAST Start=`, issue 22; the server clamps it to
/// 1 Gbit/s at most): the pacer starts faster, but the unacked budget still stops it at 512 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_port_gets_at_most_the_unacked_budget_at_a_fast_start() {
    silent_port_gets(BlastOpts {
        start_rate: 1_000_000_000,
        ..opts_default_idle()
    })
    .await;
}

async fn silent_port_gets(o: BlastOpts) {
    let s = bind(lo(), 0, &o).unwrap();
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let victim = sink.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    // Counts what reaches the victim (reading does not answer: the port stays silent).
    let counter = std::thread::spawn(move || {
        let (mut bytes, mut buf) = (0u64, vec![0u8; 65536]);
        while !stop2.load(Ordering::Relaxed) {
            if let Ok(n) = sink.recv(&mut buf) {
                bytes += n as u64 + 28;
            }
        }
        bytes
    });
    let params = TransferParams::for_mtu(3, 64 << 20, 1500).unwrap();
    let file: Arc<dyn FileHandle> = Arc::new(BytesFile::new(random_bytes(64 << 20, 2)));
    let t = Instant::now();
    let e = send(s, victim, params, file, 0, &o, Arc::new(Progress::new()))
        .await
        .unwrap_err();
    let took = t.elapsed();
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let bytes = counter.join().unwrap();
    eprintln!("silent port: {bytes} bytes in {took:?}: {e}");
    assert!(e.to_string().contains("no acknowledgement"), "{e}");
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(bytes <= 1 << 20, "{bytes} bytes reached the silent port");
}

fn opts_default_idle() -> BlastOpts {
    BlastOpts {
        linger: Duration::from_millis(300),
        ..BlastOpts::default()
    }
}

#[test]
fn payload_size_matches_the_protocol() {
    for mtu in [576u32, 1500, 9000, 65_535] {
        assert_eq!(
            drsftp_blast::payload_size_for_mtu(mtu as usize).unwrap(),
            (mtu - 64) as usize
        );
        // Under PROT P the server announces 24 bytes less (drsftp-proto's BLAST_AEAD_OVERHEAD).
        assert_eq!(
            drsftp_blast::wire::payload_size_for_mtu_aead(mtu as usize).unwrap(),
            (mtu - 64 - 24) as usize
        );
    }
    assert_eq!(drsftp_blast::wire::AEAD_OVERHEAD, 24);
}
