//! Virtual-time harness: blast senders and receivers (and optionally a SACK Reno TCP flow) exchanging datagrams
//! through one shared drsftp-netem link per direction. The clock jumps to the next event (link delivery,
//! endpoint timeout, flow start); nothing sleeps. Debug output: `BLAST_TRACE=1` prints every resend and the last
//! packet's first send, `BLAST_RATE=1` the rate controller's state every 20 ms, `TCP_TRACE=1` the TCP state.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use drsftp_blast::*;
use drsftp_netem::{Link, LinkConfig};

mod tcp;
pub use tcp::{Tcp, TcpResult};

pub const MIB: usize = 1 << 20;

pub use drsftp_testkit::data::random_bytes;

/// Fires the sender's and the receiver's timeouts that are due at `now`.
pub fn fire_due_timeouts<P: NextPacket>(now: Instant, tx: &mut Sender<P>, rx: &mut Receiver) {
    if tx.poll_timeout().is_some_and(|t| t <= now) {
        tx.handle_timeout(now);
    }
    if rx.poll_timeout().is_some_and(|t| t <= now) {
        rx.handle_timeout(now);
    }
}

#[derive(Clone)]
pub struct FlowSpec {
    pub bytes: usize,
    pub start: Duration,
    pub mtu: usize,
    pub transfer_id: u64,
    pub sender: SenderConfig,
    pub receiver: ReceiverConfig,
}

impl FlowSpec {
    pub fn new(bytes: usize, transfer_id: u64) -> Self {
        FlowSpec {
            bytes,
            start: Duration::ZERO,
            mtu: 1500,
            transfer_id,
            sender: SenderConfig::default(),
            receiver: ReceiverConfig::default(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct FlowResult {
    pub bytes: usize,
    pub packets: u64,
    /// Receiver held everything, relative to the flow's start.
    pub rx_done: Option<Duration>,
    pub tx_done: Option<Duration>,
    pub data_ok: bool,
    /// Every packet handed out exactly once.
    pub exactly_once: bool,
    pub sender: SenderStats,
    pub receiver: ReceiverStats,
    pub rate: RateStats,
    pub final_bw: f64,
    pub loss_estimate: f64,
    /// Payload bytes the receiver got in each 100 ms bucket (absolute virtual time).
    pub timeline: Vec<u64>,
}

impl FlowResult {
    /// Goodput in bit/s: file bytes over the virtual time from the flow's start until the receiver held all.
    pub fn goodput_bps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.rx_done.expect("flow finished").as_secs_f64()
    }
    /// Duplicates the receiver saw, as a fraction of the transfer's packets.
    pub fn dup_fraction(&self) -> f64 {
        self.receiver.duplicates as f64 / self.packets as f64
    }
}

#[derive(Clone)]
enum Pkt {
    Blast(usize, Vec<u8>),
    TcpData(u64),
    TcpAck(u64, u64),
}

struct Flow {
    spec: FlowSpec,
    data: Vec<u8>,
    out: Vec<u8>,
    count: Vec<u8>,
    tx: Sender,
    rx: Receiver,
    started: bool,
    start: Instant,
    rx_done: Option<Instant>,
    tx_done: Option<Instant>,
    timeline: Vec<u64>,
    last_trace: u64,
}

/// Run the flows (and an optional TCP flow starting at the given offset) over one shared forward link and one
/// shared reverse link until all blast flows finish or `limit` passes.
pub fn run(
    fwd: LinkConfig,
    rev: LinkConfig,
    specs: Vec<FlowSpec>,
    tcp_start: Option<Duration>,
    limit: Duration,
) -> (Vec<FlowResult>, Option<TcpResult>) {
    let t0 = Instant::now();
    let mut fwd: Link<Pkt> = Link::new(fwd, t0);
    let mut rev: Link<Pkt> = Link::new(rev, t0);
    let mut flows: Vec<Flow> = specs
        .into_iter()
        .map(|spec| {
            let p = TransferParams::for_mtu(spec.transfer_id, spec.bytes as u64, spec.mtu).unwrap();
            let start = t0 + spec.start;
            Flow {
                data: random_bytes(spec.bytes, spec.transfer_id),
                out: vec![0; spec.bytes],
                count: vec![0; p.total_packets() as usize],
                tx: Sender::new(p, spec.sender.clone(), start).unwrap(),
                rx: Receiver::new(p, spec.receiver.clone(), start).unwrap(),
                started: false,
                start,
                rx_done: None,
                tx_done: None,
                timeline: Vec::new(),
                last_trace: u64::MAX,
                spec,
            }
        })
        .collect();
    let mut tcp = tcp_start.map(|s| Tcp::new(s, t0));
    let bucket = |now: Instant| (now.duration_since(t0).as_millis() / 100) as usize;
    let mut batch = Batch::new();
    let mut now = t0;
    let end = t0 + limit;
    let mut stuck = 0u32;
    loop {
        // Deliveries.
        while let Some(p) = fwd.poll_deliver(now) {
            match p {
                Pkt::Blast(i, d) => {
                    let f = &mut flows[i];
                    if let Ok(RxEvent::Data { seq, offset, data }) = f.rx.handle_datagram(now, &d) {
                        f.out[offset as usize..][..data.len()].copy_from_slice(data);
                        f.count[seq as usize] = f.count[seq as usize].saturating_add(1);
                        let b = bucket(now);
                        if f.timeline.len() <= b {
                            f.timeline.resize(b + 1, 0);
                        }
                        f.timeline[b] += data.len() as u64;
                    }
                    if f.rx_done.is_none() && f.rx.is_complete() {
                        f.rx_done = Some(now);
                    }
                }
                Pkt::TcpData(seq) => {
                    let t = tcp.as_mut().unwrap();
                    let ((cum, sack), got) = t.on_data(seq);
                    let b = bucket(now);
                    if t.res.timeline.len() <= b {
                        t.res.timeline.resize(b + 1, 0);
                    }
                    t.res.timeline[b] += got;
                    rev.handle_send(now, 52, Pkt::TcpAck(cum, sack));
                }
                Pkt::TcpAck(..) => unreachable!(),
            }
        }
        while let Some(p) = rev.poll_deliver(now) {
            match p {
                Pkt::Blast(i, d) => {
                    let _ = flows[i].tx.handle_input(now, &d);
                }
                Pkt::TcpAck(cum, sack) => tcp.as_mut().unwrap().on_ack(now, cum, sack),
                Pkt::TcpData(_) => unreachable!(),
            }
        }
        // Timers and transmissions.
        for (i, f) in flows.iter_mut().enumerate() {
            if now < f.start {
                continue;
            }
            f.started = true;
            if f.tx.poll_timeout().is_some_and(|t| t <= now) {
                f.tx.handle_timeout(now);
            }
            if std::env::var_os("BLAST_RATE").is_some() {
                let ms = (now - t0).as_millis() as u64;
                if ms / 20 != f.last_trace {
                    f.last_trace = ms / 20;
                    let r = f.tx.rate();
                    eprintln!(
                        "{:8.3} flow {i} {:?} bw {:.1} pace {:.1} minrtt {:?} srtt {:?} loss {:.3} inflight {} cap {}",
                        (now - t0).as_secs_f64(), r.phase(), r.bw_bps() / 1e6, r.pacing_rate_bps() / 1e6,
                        r.min_rtt(), r.srtt(), r.loss_rate(), f.tx.inflight(), r.inflight_cap()
                    );
                }
            }
            if f.rx.poll_timeout().is_some_and(|t| t <= now) {
                f.rx.handle_timeout(now);
            }
            loop {
                batch.clear();
                let n =
                    f.tx.poll_transmit(now, 16, &f.data[..], &mut batch)
                        .unwrap();
                if std::env::var_os("BLAST_TRACE").is_some() {
                    for inf in batch.info() {
                        if inf.round > 0 || inf.seq + 1 == f.count.len() as u64 {
                            eprintln!(
                                "{:9.4} send seq {} round {} hedge {} inflight {} pace {:.1}",
                                (now - t0).as_secs_f64(),
                                inf.seq,
                                inf.round,
                                inf.hedge,
                                f.tx.inflight(),
                                f.tx.rate().pacing_rate_bps() / 1e6
                            );
                        }
                    }
                }
                for d in batch.iter() {
                    fwd.handle_send(now, d.len() + 28, Pkt::Blast(i, d.to_vec()));
                }
                if n < 16 {
                    break;
                }
            }
            while let Some(a) = f.rx.poll_transmit() {
                rev.handle_send(now, a.len() + 28, Pkt::Blast(i, a));
            }
            while let Some(ev) = f.tx.poll_event() {
                if ev == SenderEvent::Complete {
                    f.tx_done = Some(now);
                } else {
                    panic!("flow {i} failed at {:?}", now - t0);
                }
            }
        }
        if let Some(t) = tcp.as_mut() {
            if std::env::var_os("TCP_TRACE").is_some() && (now - t0).as_millis().is_multiple_of(50)
            {
                eprintln!("{:8.3} tcp {}", (now - t0).as_secs_f64(), t.debug());
            }
            if now >= t0 + t.start {
                for seq in t.poll_send(now) {
                    fwd.handle_send(now, tcp::WIRE, Pkt::TcpData(seq));
                }
            }
        }
        if flows
            .iter()
            .all(|f| f.rx_done.is_some() && f.tx_done.is_some())
            || now >= end
        {
            break;
        }
        // Next event.
        let mut next = end;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = next.min(t);
            }
        };
        consider(fwd.poll_timeout());
        consider(rev.poll_timeout());
        for f in &flows {
            if now < f.start {
                consider(Some(f.start));
            } else {
                consider(f.tx.poll_timeout());
                consider(f.rx.poll_timeout());
            }
        }
        if let Some(t) = &tcp {
            let s = t0 + t.start;
            if now < s {
                consider(Some(s));
            } else {
                consider(t.timeout());
            }
        }
        if next <= now {
            stuck += 1;
            assert!(stuck < 100_000, "no progress at {:?}", now - t0);
            continue;
        }
        stuck = 0;
        now = next;
    }
    let results = flows
        .into_iter()
        .map(|f| FlowResult {
            bytes: f.spec.bytes,
            packets: f.count.len() as u64,
            rx_done: f.rx_done.map(|t| t - f.start),
            tx_done: f.tx_done.map(|t| t - f.start),
            data_ok: f.out == f.data,
            exactly_once: f.count.iter().all(|&c| c == 1),
            sender: *f.tx.stats(),
            receiver: *f.rx.stats(),
            rate: *f.tx.rate().stats(),
            final_bw: f.tx.rate().bw_bps(),
            loss_estimate: f.tx.rate().loss_rate(),
            timeline: f.timeline,
        })
        .collect();
    (results, tcp.map(|t| t.res))
}
