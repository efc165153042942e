//! Control-channel DRS for stream mode (seed 000 §4.4, docs/drs.md §4.4): the link between one stream-mode data
//! engine and the control-channel driver beside it. Stream mode has no block headers, so SBUF rides the control
//! channel. Receiving engine: its `DrsStream` probes (`SendSbufProbe { id, size }`) are queued here; the driver
//! sends them (`SBUF <id> <size>` from a receiving client, informational `126 SBUF <id> <size>` from a receiving
//! server) and hands `200 SBUF` echoes back with their arrival time (an RTT sample). Sending engine: it registers
//! its data socket here and the driver applies the peer's size to SO_SNDBUF (`DrsSendStream`: at least the cwnd,
//! at most `drs_max`, SO_SNDBUFFORCE only where permitted, else capped at wmem_max). Nothing happens unless the
//! driver [`SbufLink::enable`]s the link, which it does only for a peer that opted in (`OPTS DRS Inband=1;`).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use drsftp_sys::sockopt;
use tokio::sync::Notify;

use super::DataOpts;
use crate::drs::DrsSendStream;

/// Counters of one transfer's control-channel SBUF traffic (or a sum over transfers, [`SbufObserver`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SbufCounts {
    /// Probes/announcements the driver put on the control channel (`SBUF <id> <size>` or `126 SBUF`).
    pub probes_sent: u64,
    /// `200 SBUF` echoes handed back to the receiving engine (client downloads).
    pub echoes: u64,
    /// `126 SBUF` notices received from the peer (client uploads).
    pub notices: u64,
    /// Sizes the peer told the sending side (`SBUF <id> <size>` commands or `126` notices).
    pub requests: u64,
    /// Requests that changed the sending socket's SO_SNDBUF.
    pub sndbuf_sets: u64,
    /// Last size announced to the peer, bytes.
    pub last_announced: u64,
    /// Last size the peer told us, bytes.
    pub last_told: u64,
    /// The send buffer `DrsSendStream` chose for the last request (setsockopt units).
    pub last_applied: u64,
    /// SO_SNDBUF as the kernel reports it (doubled) when the sending socket was registered, and after the last
    /// request; 0 if no sending socket was registered.
    pub sndbuf_initial: u64,
    pub sndbuf_now: u64,
}

impl SbufCounts {
    fn add(&mut self, o: &SbufCounts) {
        self.probes_sent += o.probes_sent;
        self.echoes += o.echoes;
        self.notices += o.notices;
        self.requests += o.requests;
        self.sndbuf_sets += o.sndbuf_sets;
        if o.probes_sent > 0 {
            self.last_announced = o.last_announced;
        }
        if o.requests > 0 {
            self.last_told = o.last_told;
            self.last_applied = o.last_applied;
        }
        if o.sndbuf_now > 0 {
            self.sndbuf_initial = o.sndbuf_initial;
            self.sndbuf_now = o.sndbuf_now;
        }
    }
}

/// Sums the [`SbufCounts`] of every transfer run with a `DataOpts` that carries it (`DataOpts::sbuf_observer`):
/// lets a server's operator or a test see what the control-channel DRS did.
#[derive(Debug, Default)]
pub struct SbufObserver(Mutex<SbufCounts>);

impl SbufObserver {
    /// Adds one transfer's counts (the `last_*` values are replaced when that transfer has them).
    pub fn record(&self, c: &SbufCounts) {
        if let Ok(mut t) = self.0.lock() {
            t.add(c);
        }
    }
    /// The totals so far.
    pub fn total(&self) -> SbufCounts {
        self.0.lock().map(|t| *t).unwrap_or_default()
    }
}

#[derive(Debug)]
struct SendSide {
    /// A duplicate of the engine's data socket (same socket, so setsockopt acts on it).
    fd: OwnedFd,
    drs: DrsSendStream,
}

#[derive(Debug, Default)]
struct Inner {
    probes: VecDeque<(u64, u64)>,
    echoes: VecDeque<(u64, Instant)>,
    sender: Option<SendSide>,
    /// The latest request that came before the sending socket was registered.
    pending: Option<(u64, u64)>,
    counts: SbufCounts,
}

/// One transfer's control-channel SBUF link (lives in `Progress`, shared by engine and driver).
#[derive(Debug, Default)]
pub struct SbufLink {
    enabled: AtomicBool,
    one_way: AtomicBool,
    has_echo: AtomicBool,
    ready: Notify,
    inner: Mutex<Inner>,
}

impl SbufLink {
    /// The peer opted in and the transfer runs in stream mode: probes may go out and sizes may be applied.
    /// `one_way`: probes become `126` notices that are never answered (a receiving server).
    pub fn enable(&self, one_way: bool) {
        self.one_way.store(one_way, Ordering::Relaxed);
        self.enabled.store(true, Ordering::Release);
    }

    /// See [`enable`](Self::enable).
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    pub(crate) fn is_one_way(&self) -> bool {
        self.one_way.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This transfer's counters so far.
    pub fn counts(&self) -> SbufCounts {
        self.lock().counts
    }

    // ---- receiving engine ----

    /// A probe from the receiving engine's `DrsStream` for the driver to send.
    pub(crate) fn push_probe(&self, id: u64, size: u64) {
        self.lock().probes.push_back((id, size));
        self.ready.notify_one();
    }

    /// Echoes that arrived since the last call, with their arrival times.
    pub(crate) fn take_echoes(&self) -> Vec<(u64, Instant)> {
        if !self.has_echo.swap(false, Ordering::Acquire) {
            return vec![];
        }
        self.lock().echoes.drain(..).collect()
    }

    // ---- control-channel driver ----

    /// Resolves when probes are queued (a permit is kept if none is waiting, so nothing is missed).
    pub async fn probe_ready(&self) {
        self.ready.notified().await
    }

    /// The queued probes, oldest first.
    pub fn take_probes(&self) -> Vec<(u64, u64)> {
        self.lock().probes.drain(..).collect()
    }

    /// A probe went out on the control channel.
    pub fn probe_sent(&self, size: u64) {
        let mut i = self.lock();
        i.counts.probes_sent += 1;
        i.counts.last_announced = size;
    }

    /// `200 SBUF <id> <size>` arrived at `at`: the engine turns it into an RTT sample (TCP_INFO stays the primary
    /// RTT source on Linux; this echo keeps DRS working where TCP_INFO is missing or stale).
    pub fn echo(&self, id: u64, at: Instant) {
        let mut i = self.lock();
        i.counts.echoes += 1;
        i.echoes.push_back((id, at));
        drop(i);
        self.has_echo.store(true, Ordering::Release);
    }

    /// `126 SBUF <id> <size>` arrived: the peer's new receive buffer, for our send buffer.
    pub fn notice(&self, id: u64, size: u64) -> Option<u64> {
        self.lock().counts.notices += 1;
        self.apply_sndbuf(id, size)
    }

    /// The peer's receive buffer is `size`: resize the sending socket's SO_SNDBUF to follow it. Returns the send
    /// buffer chosen, or `None` if no sending socket is registered yet (the size is kept and applied when one is)
    /// or the link is off.
    pub fn apply_sndbuf(&self, id: u64, size: u64) -> Option<u64> {
        if !self.is_enabled() {
            return None;
        }
        let mut i = self.lock();
        i.counts.requests += 1;
        i.counts.last_told = size;
        if i.sender.is_none() {
            i.pending = Some((id, size));
            return None;
        }
        match apply(&mut i, id, size) {
            Ok(n) => Some(n),
            Err(e) => {
                tracing::debug!("SBUF {id} {size}: {e}");
                None
            }
        }
    }

    // ---- sending engine ----

    /// The sending engine's data socket, for [`apply_sndbuf`](Self::apply_sndbuf) until the guard drops. `None`
    /// (nothing registered) unless the link is enabled.
    pub(crate) fn register_sender(
        &self,
        sock: impl AsFd,
        opts: &DataOpts,
    ) -> io::Result<Option<SenderGuard<'_>>> {
        if !self.is_enabled() {
            return Ok(None);
        }
        let fd = sock.as_fd().try_clone_to_owned()?;
        let initial = sockopt::send_buf(&fd).map_err(io::Error::other)? as u64;
        let limits = sockopt::buf_limits().map_err(io::Error::other)?;
        let drs = DrsSendStream::new(initial / 2, limits, opts.drs_max);
        let mut i = self.lock();
        i.counts.sndbuf_initial = initial;
        i.counts.sndbuf_now = initial;
        i.sender = Some(SendSide { fd, drs });
        if let Some((id, size)) = i.pending.take() {
            if let Err(e) = apply(&mut i, id, size) {
                tracing::debug!("SBUF {id} {size} (held until the data connection was open): {e}");
            }
        }
        Ok(Some(SenderGuard(self)))
    }
}

fn apply(i: &mut Inner, id: u64, size: u64) -> io::Result<u64> {
    let Some(s) = i.sender.as_mut() else {
        return Err(io::Error::other("no sending socket"));
    };
    let before = sockopt::send_buf(&s.fd).map_err(io::Error::other)? as u64;
    let n = s.drs.on_sbuf_request(&s.fd, Instant::now(), id, size)?;
    let after = sockopt::send_buf(&s.fd).map_err(io::Error::other)? as u64;
    i.counts.last_applied = n;
    i.counts.sndbuf_now = after;
    if after != before {
        i.counts.sndbuf_sets += 1;
    }
    Ok(n)
}

/// Unregisters the sending socket (closing the duplicate descriptor) when the engine is done with it.
pub(crate) struct SenderGuard<'a>(&'a SbufLink);

impl Drop for SenderGuard<'_> {
    fn drop(&mut self) {
        self.0.lock().sender = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sizes_told_before_registration_are_applied_on_registration() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let _s = l.accept().unwrap();
        let link = SbufLink::default();
        assert_eq!(link.apply_sndbuf(1, 1 << 20), None, "off: nothing");
        assert_eq!(link.counts(), SbufCounts::default());
        link.enable(false);
        assert_eq!(link.apply_sndbuf(2, 1 << 20), None, "no socket yet: held");
        let opts = DataOpts::default();
        let g = link.register_sender(&c, &opts).unwrap().expect("enabled");
        let k = link.counts();
        assert_eq!(k.requests, 1);
        assert_eq!(k.sndbuf_sets, 1);
        assert_eq!(k.sndbuf_now, sockopt::send_buf(&c).unwrap() as u64);
        assert_eq!(
            k.last_applied,
            1 << 20,
            "an idle socket's cwnd is below 1 MiB"
        );
        let wmax = sockopt::buf_limits().unwrap().wmem_max as u64;
        assert!(
            k.sndbuf_now == 2 * k.last_applied || k.sndbuf_now == 2 * k.last_applied.min(wmax),
            "{k:?}"
        );
        drop(g);
        assert_eq!(link.apply_sndbuf(3, 1 << 21), None, "unregistered again");

        link.push_probe(7, 65536);
        tokio::time::timeout(std::time::Duration::from_secs(1), link.probe_ready())
            .await
            .expect("permit kept");
        assert_eq!(link.take_probes(), vec![(7, 65536)]);
        assert!(link.take_echoes().is_empty());
        let at = Instant::now();
        link.echo(7, at);
        assert_eq!(link.take_echoes(), vec![(7, at)]);
        assert!(link.take_echoes().is_empty());
    }
}
