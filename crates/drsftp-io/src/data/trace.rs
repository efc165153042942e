//! Per-stream traces of one transfer (`DataOpts::trace`): every data connection, sending or receiving, samples
//! TCP_INFO at most every [`SPACING`] into a bounded [`TraceLog`] (buffer in force, RTT, BDP estimate, bytes,
//! advertised window, cwnd), so `drsftp copy --trace` can show how each stream's window evolved. Memory per
//! stream is at most [`MAX_ROWS`] rows whatever the transfer's length.

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use drsftp_sys::tcp_info::tcp_info;

use super::sockets::Side;
use crate::drs::{DrsStream, TraceLog, TraceRow};

/// Closest spacing of two rows of one stream.
pub(crate) const SPACING: Duration = Duration::from_millis(50);

/// Rows kept per stream before the trace is decimated (about 330 KB; 3.4 minutes at [`SPACING`] before the
/// first halving of the resolution).
pub(crate) const MAX_ROWS: usize = 4096;

/// One stream's trace. Inert (no TCP_INFO reads, no memory) unless tracing was asked for.
#[derive(Debug)]
pub(crate) struct StreamTrace {
    /// Common to all streams of the transfer, so their rows line up.
    start: Instant,
    log: Option<TraceLog>,
    bytes: u64,
}

impl StreamTrace {
    pub(crate) fn new(on: bool, start: Instant) -> Self {
        StreamTrace {
            start,
            log: on.then(|| TraceLog::new(SPACING, MAX_ROWS)),
            bytes: 0,
        }
    }

    /// `n` more payload bytes went through this stream; record a row if one is due. `buffer` is the stream's
    /// buffer in force (the gauge's value); with a DRS driver its RTT and BDP estimates are used, otherwise the
    /// kernel's (`rcv_rtt` receiving; `rtt` and the cwnd as the BDP sending).
    pub(crate) fn sample(
        &mut self,
        fd: impl AsFd,
        now: Instant,
        n: u64,
        side: Side,
        buffer: u64,
        drs: Option<&DrsStream>,
    ) {
        self.bytes += n;
        let Some(log) = self.log.as_mut() else {
            return;
        };
        let t = now.saturating_duration_since(self.start);
        if !log.wants(t) {
            return;
        }
        let Ok(info) = tcp_info(fd) else {
            return;
        };
        let (rtt, bdp) = match (drs, side) {
            (Some(d), _) => (d.estimator().rtt(), d.estimator().bdp_estimate()),
            (None, Side::Send) => (info.rtt, info.cwnd_bytes()),
            (None, Side::Recv) => (info.rcv_rtt, 0),
        };
        log.push(TraceRow {
            t,
            buffer,
            rtt,
            bdp,
            bytes: self.bytes,
            bps: 0.0,
            rcv_wnd: info.rcv_wnd,
            rcv_ssthresh: info.rcv_ssthresh,
            cwnd: info.cwnd_bytes(),
        });
    }

    /// The rows recorded (empty when tracing is off).
    pub(crate) fn finish(self) -> Vec<TraceRow> {
        self.log.map(TraceLog::into_rows).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t_ms: u64, bytes: u64) -> TraceRow {
        TraceRow {
            t: Duration::from_millis(t_ms),
            buffer: 0,
            rtt: Duration::ZERO,
            bdp: 0,
            bytes,
            bps: 0.0,
            rcv_wnd: 0,
            rcv_ssthresh: 0,
            cwnd: 0,
        }
    }

    #[test]
    fn trace_log_is_bounded_and_covers_the_whole_run() {
        let mut log = TraceLog::new(SPACING, 64);
        // Ten hours at one offer per millisecond, 1 MB per millisecond (8 Gbit/s).
        let mut offered = 0u64;
        for ms in (0..10 * 3600 * 1000u64).step_by(7) {
            log.push(row(ms, ms * 1_000_000));
            offered += 1;
            assert!(log.rows().len() < 64);
        }
        let rows = log.rows();
        assert!(offered > 1_000_000 && rows.len() >= 32, "{}", rows.len());
        assert_eq!(rows[0].t, Duration::ZERO);
        assert!(rows.last().unwrap().t > Duration::from_secs(9 * 3600));
        for w in rows.windows(2) {
            assert!(w[1].t > w[0].t);
            // Throughput stays right through the decimation (constant rate in, constant rate out).
            assert!((w[1].bps / 8e9 - 1.0).abs() < 1e-6, "{}", w[1].bps);
        }
    }

    #[test]
    fn trace_log_keeps_rows_apart_and_off_records_nothing() {
        let mut log = TraceLog::new(Duration::from_millis(50), 100);
        for ms in 0..1000 {
            log.push(row(ms, ms));
        }
        assert_eq!(log.rows().len(), 20);
        let mut off = TraceLog::new(SPACING, 0);
        off.push(row(0, 0));
        assert!(off.rows().is_empty() && !off.wants(Duration::from_secs(1)));
    }
}
