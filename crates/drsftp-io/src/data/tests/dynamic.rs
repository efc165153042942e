//! Dynamic MODE E sends (`-p auto`): connections joining and retiring mid-transfer, the EOF count covering every
//! connection that ever joined, the `AutoSender` controller loop on loopback, and per-stream traces.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use drsftp_storage::{checksum_bytes, ChecksumAlg, FileHandle, Result as SResult};
use drsftp_tune::{AutoConfig, BufferPolicy, StreamAction};
use tokio::sync::mpsc;

use super::*;
use crate::data::{connect, listen, recv_mode_e, send_mode_e_dynamic, AutoSender, SendControl};

/// Reads of `inner` paced to `rate` bytes/s in total, whatever the number of readers (a path whose capacity extra
/// streams cannot raise).
#[derive(Debug)]
struct Paced {
    inner: Arc<dyn FileHandle>,
    rate: f64,
    start: Instant,
    issued: Mutex<u64>,
}

impl Paced {
    fn new(inner: Arc<dyn FileHandle>, rate: f64) -> Arc<Self> {
        Arc::new(Paced {
            inner,
            rate,
            start: Instant::now(),
            issued: Mutex::new(0),
        })
    }
}

impl FileHandle for Paced {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> SResult<usize> {
        let n = self.inner.read_at(buf, offset)?;
        let due = {
            let mut i = self.issued.lock().unwrap();
            *i += n as u64;
            self.start + Duration::from_secs_f64(*i as f64 / self.rate)
        };
        if let Some(d) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
        Ok(n)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> SResult<()> {
        self.inner.write_at(buf, offset)
    }
    fn len(&self) -> SResult<u64> {
        self.inner.len()
    }
    fn sync(&self) -> SResult<()> {
        Ok(())
    }
}

/// `len` bytes whose value is a function of the offset, without memory.
#[derive(Debug)]
struct Pattern(u64);

impl FileHandle for Pattern {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> SResult<usize> {
        let n = buf.len().min(self.0.saturating_sub(offset) as usize);
        for (k, b) in buf[..n].iter_mut().enumerate() {
            *b = ((offset + k as u64) % 251) as u8;
        }
        Ok(n)
    }
    fn write_at(&self, _buf: &[u8], _offset: u64) -> SResult<()> {
        Ok(())
    }
    fn len(&self) -> SResult<u64> {
        Ok(self.0)
    }
    fn sync(&self) -> SResult<()> {
        Ok(())
    }
}

/// Counts payload bytes and checks each against the [`Pattern`].
#[derive(Debug, Default)]
struct PatternSink {
    bytes: AtomicU64,
    bad: AtomicU64,
}

impl FileHandle for PatternSink {
    fn read_at(&self, _buf: &mut [u8], _offset: u64) -> SResult<usize> {
        Ok(0)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> SResult<()> {
        self.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
        let bad = buf
            .iter()
            .enumerate()
            .filter(|&(k, &b)| b != ((offset + k as u64) % 251) as u8)
            .count();
        self.bad.fetch_add(bad as u64, Ordering::Relaxed);
        Ok(())
    }
    fn len(&self) -> SResult<u64> {
        Ok(0)
    }
    fn sync(&self) -> SResult<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn streams_join_and_retire_mid_transfer() {
    let opts = DataOpts {
        block_size: 64 << 10,
        ..DataOpts::default()
    };
    const LEN: usize = 48 << 20;
    let data = random(LEN, 21);
    // A source paced to 16 MB/s (about three seconds) so the transfer is still running when streams change, even
    // when a loaded 2-core machine takes a while to connect the joining streams.
    let src = Paced::new(MemFile::new(data.clone()), 16e6);
    let dst = MemFile::empty();
    let l = listen(lo(), &opts).await.unwrap();
    let addr = l.local_addr().unwrap();
    // The receiving side: every accepted connection goes to the engine, as the drivers do it.
    let (ctx, crx) = mpsc::channel(16);
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            if ctx.send(s).await.is_err() {
                return;
            }
        }
    });
    let (ptx, prx) = (Arc::new(Progress::new()), Arc::new(Progress::new()));
    let recv = tokio::spawn({
        let (dst, opts, prx) = (dst.clone(), opts.clone(), prx.clone());
        async move { recv_mode_e(crx, dst, 0, &opts, prx).await }
    });
    let first = connect(addr, &opts).await.unwrap();
    let (more_tx, more_rx) = mpsc::channel(8);
    let control = SendControl::new();
    let send = tokio::spawn({
        let (control, opts, ptx) = (control.clone(), opts.clone(), ptx.clone());
        let src: Arc<dyn FileHandle> = src;
        async move {
            send_mode_e_dynamic(
                vec![first],
                more_rx,
                control,
                src,
                vec![0..u64::MAX],
                0,
                &opts,
                ptx,
            )
            .await
        }
    });
    let wait_for = |frac: u64| {
        let ptx = ptx.clone();
        async move {
            while ptx.bytes() < LEN as u64 * frac / 8 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    };
    wait_for(1).await;
    assert_eq!(control.active(), 1);
    for _ in 0..3 {
        more_tx
            .send(connect(addr, &opts).await.unwrap())
            .await
            .unwrap();
    }
    while control.active() < 4 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let at_add = ptx.bytes();
    wait_for(4).await;
    control.retire(2);
    while control.retired() < 2 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(control.active(), 2);
    let at_retire = ptx.bytes();
    // Retiring more than may go is clamped: one connection always stays.
    control.retire(100);
    let (s, r) = tokio::time::timeout(Duration::from_secs(120), async {
        (send.await.unwrap(), recv.await.unwrap())
    })
    .await
    .expect("transfer hung");
    let (s, r) = (s.expect("send failed"), r.expect("receive failed"));
    assert!(at_add < LEN as u64 / 2, "streams joined too late to matter");
    assert!(
        at_retire < LEN as u64 * 7 / 8,
        "streams retired too late to matter"
    );
    assert_eq!((s.bytes, r.bytes), (LEN as u64, LEN as u64));
    // EOF announced all four connections and the receiver counted four EODs.
    assert_eq!((s.streams, r.streams), (4, 4));
    assert_eq!(control.used(), 4);
    assert_eq!(control.retired(), 3, "2 + the clamped 100 = all but one");
    assert!(control.is_closed());
    assert_eq!((s.reusable.len(), r.reusable.len()), (4, 4));
    let got = dst.bytes();
    assert_eq!(
        checksum_bytes(ChecksumAlg::Sha256, &got),
        checksum_bytes(ChecksumAlg::Sha256, &data)
    );
    // A connection offered after the end is not used, and comes back.
    assert!(more_tx
        .send(connect(addr, &opts).await.unwrap())
        .await
        .is_err());
}

#[tokio::test(flavor = "multi_thread")]
async fn dynamic_send_with_no_changes_matches_the_static_one() {
    let opts = DataOpts::default();
    let data = random(3 << 20, 5);
    let dst = MemFile::empty();
    let (tx, rx) = pairs(3, &opts).await;
    let (_keep, more) = mpsc::channel(1);
    let control = SendControl::new();
    let (s, r) = tokio::try_join!(
        send_mode_e_dynamic(
            tx,
            more,
            control.clone(),
            MemFile::new(data.clone()),
            vec![0..u64::MAX],
            0,
            &opts,
            Arc::new(Progress::new())
        ),
        recv_mode_e(queued(rx), dst.clone(), 0, &opts, Arc::new(Progress::new())),
    )
    .unwrap();
    assert_eq!((s.streams, r.streams, control.used()), (3, 3, 3));
    assert!(dst.bytes() == data);
    // A used control is refused for a second transfer.
    let (tx, _rx) = pairs(1, &opts).await;
    let (_k, more) = mpsc::channel(1);
    let again = send_mode_e_dynamic(
        tx,
        more,
        control,
        MemFile::new(data),
        vec![0..u64::MAX],
        0,
        &opts,
        Arc::new(Progress::new()),
    )
    .await;
    assert!(
        matches!(again, Err(crate::data::DataError::Io(_))),
        "{again:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn auto_sender_probes_reverts_and_holds_on_a_flat_path() {
    let opts = DataOpts::default();
    // A path capped at 120 MB/s in total: a second stream buys nothing, so the controller must revert its probe
    // and then hold (re-probing only after `reprobe`, longer than the transfer).
    const LEN: u64 = 300 << 20;
    let src = Paced::new(Arc::new(Pattern(LEN)), 120e6);
    let sink = Arc::new(PatternSink::default());
    let (addr, conns) = accepting(&opts).await;
    let prx = Arc::new(Progress::new());
    let recv = tokio::spawn({
        let (sink, opts, prx) = (sink.clone(), opts.clone(), prx.clone());
        async move { recv_mode_e(conns, sink, 0, &opts, prx).await }
    });
    let cfg = AutoConfig {
        min_streams: 1,
        max_streams: 3,
        min_gain: 0.15,
        min_marginal: -1.0,
        linear_marginal: 2.0,
        headroom_growth: 2,
        loss_floor: 1e-4,
        // Never "a standing queue": the controller takes the first stream's handshake RTT as the path's
        // (`scaled_to_rtt`), tens of microseconds on loopback, and a scheduling hiccup on a loaded 2-core machine
        // puts the smoothed RTT milliseconds above it, which held every probe in about 1 run of 3. The queue rule
        // has its own tests (drsftp-tune); this one is about the throughput rule.
        queue_headroom: f64::INFINITY,
        backoff_drop: 0.5,
        settle: Duration::from_millis(200),
        headroom_settle: Duration::from_millis(200),
        first_settle: Duration::from_millis(200),
        loss_settle: Duration::from_millis(200),
        samples: 3,
        reprobe: Duration::from_secs(600),
        path_rtt: None,
    };
    let auto = AutoSender {
        config: cfg.clone(),
        interval: Duration::from_millis(100),
        gate: None,
    };
    let first = connect(addr, &opts).await.unwrap();
    let opened = Arc::new(AtomicU64::new(0));
    let connector = {
        let (opts, opened) = (opts.clone(), opened.clone());
        move || {
            let (opts, opened) = (opts.clone(), opened.clone());
            async move {
                opened.fetch_add(1, Ordering::Relaxed);
                connect(addr, &opts).await
            }
        }
    };
    let ptx = Arc::new(Progress::new());
    let rep = tokio::time::timeout(
        Duration::from_secs(120),
        auto.send(
            vec![first],
            connector,
            src,
            vec![0..u64::MAX],
            0,
            &opts,
            ptx,
        ),
    )
    .await
    .expect("auto send hung")
    .expect("auto send failed");
    let r = recv.await.unwrap().expect("receive failed");
    eprintln!("actions: {:?}", rep.actions);
    assert_eq!((rep.data.bytes, r.bytes), (LEN, LEN));
    assert_eq!(sink.bytes.load(Ordering::Relaxed), LEN);
    assert_eq!(sink.bad.load(Ordering::Relaxed), 0);
    // The controller probed, every decision stayed within its limits, and decisions were at least `settle` apart.
    assert!(!rep.actions.is_empty(), "no probe in {LEN} bytes");
    let mut n = 1u32;
    for (i, e) in rep.actions.iter().enumerate() {
        n = match e.action {
            StreamAction::Add(k) => n + k,
            StreamAction::Retire(k) => n - k,
        };
        assert_eq!(n, e.streams);
        assert!((cfg.min_streams..=cfg.max_streams).contains(&n), "{e:?}");
        if i > 0 {
            assert!(
                e.at - rep.actions[i - 1].at >= cfg.settle,
                "{:?}",
                rep.actions
            );
        }
    }
    // No oscillation: after a revert/back-off nothing is added again before `reprobe`.
    if let Some(k) = rep
        .actions
        .iter()
        .position(|e| matches!(e.action, StreamAction::Retire(_)))
    {
        assert!(
            rep.actions[k..]
                .iter()
                .all(|e| matches!(e.action, StreamAction::Retire(_))),
            "{:?}",
            rep.actions
        );
    }
    // Every Add was opened and joined (or came back unused); EOF counted them all.
    let added: u32 = rep
        .actions
        .iter()
        .map(|e| match e.action {
            StreamAction::Add(k) => k,
            _ => 0,
        })
        .sum();
    assert_eq!(opened.load(Ordering::Relaxed), added as u64);
    assert_eq!(rep.connect_failures, 0);
    // Every connection comes back: the ones that carried data (retired or not) and any that came up too late.
    assert_eq!(rep.data.reusable.len(), 1 + added as usize);
    assert!(rep.data.streams <= 1 + added as usize);
    assert_eq!(r.streams, rep.data.streams);
}

#[tokio::test(flavor = "multi_thread")]
async fn traces_cover_every_stream_on_both_sides() {
    let opts = DataOpts {
        buffer: BufferPolicy::Drs,
        trace: true,
        ..DataOpts::default()
    };
    let data = random(24 << 20, 8);
    let dst = MemFile::empty();
    let (tx, rx) = pairs(2, &opts).await;
    let (s, r) = mode_e(
        tx,
        queued(rx),
        super::slow::SlowFile::new(MemFile::new(data), 8, Duration::from_millis(5)),
        dst,
        vec![0..u64::MAX],
        0,
        0,
        &opts,
    )
    .await;
    for (side, rep) in [("send", &s), ("recv", &r)] {
        assert_eq!(rep.traces.len(), 2, "{side}");
        let mut total = 0;
        for t in &rep.traces {
            assert!(!t.is_empty(), "{side}: a stream without rows");
            for w in t.windows(2) {
                assert!(w[1].t >= w[0].t + crate::data::trace::SPACING, "{side}");
                assert!(w[1].bytes >= w[0].bytes);
            }
            total += t.last().unwrap().bytes;
            assert!(t.iter().all(|row| row.buffer > 0), "{side}: {t:?}");
        }
        assert!(total <= 24 << 20, "{side}");
    }
    // Receiving under DRS: the estimator's RTT is in the rows.
    assert!(r
        .traces
        .iter()
        .flatten()
        .any(|row| row.rtt > Duration::ZERO));
    // Without tracing, nothing is recorded.
    let (tx, rx) = pairs(2, &DataOpts::default()).await;
    let (s, r) = mode_e(
        tx,
        queued(rx),
        MemFile::new(random(1 << 20, 1)),
        MemFile::empty(),
        vec![0..u64::MAX],
        0,
        0,
        &DataOpts::default(),
    )
    .await;
    assert!(s.traces.is_empty() && r.traces.is_empty());
}
