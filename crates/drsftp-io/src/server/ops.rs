//! What an operator adds to a running server: settings that can change without a restart ([`Live`]: users and
//! limits, swapped on SIGHUP while sessions and transfers keep running), the data-port range every passive
//! listener binds in ([`DataPorts`]: PASV, EPSV, SPAS and BPAS), the transfer log and the metrics. The session
//! driver reports each finished transfer here once ([`ServerOps::transfer_done`]); both sinks are cheap to feed
//! (counters, a bounded channel), so nothing here is on a data path.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use drsftp_proto::server::{DataEndpoint, Mode, Payload, Rest, TransferPlan, TransferResult};
use tokio::net::TcpListener;

use super::metrics::Metrics;
use super::xferlog::{TransferLog, TransferRecord};
use super::{ServerLimits, Users};
use crate::data::{self, DataOpts};

/// Settings a running server re-reads on every use, so a reload (SIGHUP) takes effect for the next login or
/// connection without touching sessions already running (a session keeps the account it logged in with).
#[derive(Debug, Default)]
pub struct Live {
    users: RwLock<Option<Arc<Users>>>,
    limits: RwLock<Option<ServerLimits>>,
}

impl Live {
    /// From now on, logins are checked against `users`.
    pub fn set_users(&self, users: Arc<Users>) {
        *self.users.write().unwrap_or_else(|e| e.into_inner()) = Some(users);
    }

    /// From now on, new sessions and failed logins are counted against `limits`.
    pub fn set_limits(&self, limits: ServerLimits) {
        *self.limits.write().unwrap_or_else(|e| e.into_inner()) = Some(limits);
    }

    /// The users set by [`Self::set_users`], if any.
    pub(crate) fn users(&self) -> Option<Arc<Users>> {
        self.users.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The limits set by [`Self::set_limits`], if any.
    pub(crate) fn limits(&self) -> Option<ServerLimits> {
        *self.limits.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// The ports passive data listeners may use (`--data-ports LOW-HIGH`), for firewalls that open only a range.
/// Binds start at a rotating position so concurrent sessions do not all probe the same ports first.
#[derive(Debug)]
pub struct DataPorts {
    low: u16,
    high: u16,
    next: AtomicU32,
}

/// Why a `--data-ports` value is not a range.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("data ports {0:?}: expected LOW-HIGH with 1024 <= LOW <= HIGH <= 65535, e.g. 50000-51000")]
pub struct DataPortsError(String);

impl std::str::FromStr for DataPorts {
    type Err = DataPortsError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || DataPortsError(s.to_string());
        let (a, b) = s.trim().split_once('-').ok_or_else(err)?;
        let low: u16 = a.trim().parse().map_err(|_| err())?;
        let high: u16 = b.trim().parse().map_err(|_| err())?;
        // Below 1024 would need privileges the server drops (--run-as) and clients refuse such ports anyway.
        if low < 1024 || low > high {
            return Err(err());
        }
        Ok(DataPorts::new(low, high))
    }
}

impl std::fmt::Display for DataPorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.low, self.high)
    }
}

impl DataPorts {
    /// Ports `low..=high`.
    pub fn new(low: u16, high: u16) -> DataPorts {
        DataPorts {
            low: low.min(high),
            high: high.max(low),
            next: AtomicU32::new(0),
        }
    }

    /// The first and last port.
    pub fn bounds(&self) -> (u16, u16) {
        (self.low, self.high)
    }

    /// Tries `bind` on each port of the range once, from a rotating start, until one is not in use.
    /// Errors other than "address in use" end the search at once (they would repeat on every port).
    async fn bind_any<T, F, Fut>(&self, ip: IpAddr, mut bind: F) -> std::io::Result<T>
    where
        F: FnMut(SocketAddr) -> Fut,
        Fut: std::future::Future<Output = std::io::Result<T>>,
    {
        let n = u32::from(self.high - self.low) + 1;
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        for i in 0..n {
            let port = self.low + ((start + i) % n) as u16;
            match bind(SocketAddr::new(ip, port)).await {
                Ok(x) => return Ok(x),
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!("no free data port in {self}"),
        ))
    }
}

/// Operations hooks of a server; all optional, all cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ServerOps {
    /// Users and limits that a reload replaces.
    pub live: Arc<Live>,
    /// Passive listeners bind only in this range (default: any free port).
    pub data_ports: Option<Arc<DataPorts>>,
    /// One JSON line per transfer.
    pub transfer_log: Option<TransferLog>,
    /// Prometheus counters.
    pub metrics: Option<Arc<Metrics>>,
}

impl ServerOps {
    /// A passive TCP data listener on `ip`, in the data-port range if one is set.
    pub(crate) async fn listen(&self, ip: IpAddr, opts: &DataOpts) -> std::io::Result<TcpListener> {
        match &self.data_ports {
            None => data::listen(SocketAddr::new(ip, 0), opts).await,
            Some(r) => r.bind_any(ip, |a| data::listen(a, opts)).await,
        }
    }

    /// The port a blast (BPAS) UDP socket binds: `bind(port)` over the range, or port 0.
    pub(crate) fn bind_udp<T>(
        &self,
        mut bind: impl FnMut(u16) -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        let Some(r) = &self.data_ports else {
            return bind(0);
        };
        let n = u32::from(r.high - r.low) + 1;
        let start = r.next.fetch_add(1, Ordering::Relaxed) % n;
        for i in 0..n {
            match bind(r.low + ((start + i) % n) as u16) {
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
                other => return other,
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            format!("no free data port in {r}"),
        ))
    }

    /// A finished (or aborted) transfer: one line in the transfer log, counters in the metrics.
    pub(crate) fn transfer_done(&self, done: &Done<'_>) {
        if self.transfer_log.is_none() && self.metrics.is_none() {
            return;
        }
        let seconds = done.info.started.elapsed().as_secs_f64();
        let (bytes, streams, code, result) = match done.result {
            TransferResult::Ok { bytes, streams } => (*bytes, *streams as u64, 226, "ok"),
            TransferResult::Failed { code, .. } => (done.progress_bytes, 0, *code, "failed"),
            TransferResult::Aborted => (done.progress_bytes, 0, 426, "aborted"),
        };
        if let Some(m) = &self.metrics {
            m.transfer(done.info.sending, result, bytes, seconds);
            m.kernel_copied(done.kernel_copied);
        }
        if let Some(log) = &self.transfer_log {
            log.write(TransferRecord {
                time: super::xferlog::now_rfc3339(),
                user: done.user.to_string(),
                peer: done.peer.to_string(),
                command: done.info.command,
                restart_offset: done.info.restart_offset,
                restart_ranges: done.info.restart_ranges.clone(),
                path: done.info.path.clone(),
                bytes,
                seconds: (seconds * 1000.0).round() / 1000.0,
                streams: if streams > 0 {
                    streams
                } else {
                    done.streams_seen
                },
                transport: done.info.transport,
                buffer: done.info.buffer.clone(),
                checksum: done.crc32c.map(|c| format!("crc32c:{c:08x}")),
                code,
                result,
                message: match done.result {
                    TransferResult::Failed { message, .. } => Some(message.clone()),
                    _ => None,
                },
            });
        }
    }
}

/// What the logs need to know about a transfer, taken from its plan when it starts.
#[derive(Debug, Clone)]
pub(crate) struct TransferInfo {
    pub(crate) command: &'static str,
    pub(crate) restart_offset: Option<u64>,
    pub(crate) restart_ranges: Option<String>,
    pub(crate) path: String,
    pub(crate) sending: bool,
    pub(crate) transport: &'static str,
    pub(crate) buffer: String,
    pub(crate) started: Instant,
}

impl TransferInfo {
    /// The plan's file transfer, or `None` for a listing (listings are neither logged nor counted).
    pub(crate) fn of(
        plan: &TransferPlan,
        default_buffer: &drsftp_tune::BufferPolicy,
    ) -> Option<Self> {
        let (path, sending) = match &plan.payload {
            Payload::SendFile { path, .. } => (path.clone(), true),
            Payload::RecvFile { path, .. } => (path.clone(), false),
            Payload::SendBytes(_) | Payload::SendListing { .. } => return None,
        };
        let (restart_offset, restart_ranges) = match &plan.restart {
            None => (None, None),
            Some(Rest::Offset(n)) => (Some(*n), None),
            Some(Rest::Ranges(r)) => (None, Some(r.to_string())),
        };
        let transport = match (&plan.endpoint, plan.mode) {
            (DataEndpoint::Blast(_), _) => "udp",
            (_, Mode::Extended) => "mode-e",
            (_, Mode::Stream) => "tcp-stream",
        };
        let buffer = match (&plan.endpoint, plan.tcp_buffer) {
            (DataEndpoint::Blast(_), _) => "blast".to_string(),
            (_, Some(b)) => format!("fixed {b}"),
            (_, None) => default_buffer.to_string(),
        };
        Some(TransferInfo {
            command: plan.verb,
            restart_offset,
            restart_ranges,
            path,
            sending,
            transport,
            buffer,
            started: Instant::now(),
        })
    }
}

/// A transfer's end, as the session driver saw it.
pub(crate) struct Done<'a> {
    pub(crate) info: &'a TransferInfo,
    pub(crate) peer: SocketAddr,
    pub(crate) user: &'a str,
    pub(crate) result: &'a TransferResult,
    /// Bytes counted so far (for failed and aborted transfers, whose result carries none).
    pub(crate) progress_bytes: u64,
    /// Data connections the engine reported in use.
    pub(crate) streams_seen: u64,
    /// The CRC32C of a whole file sent, when the engine computed it.
    pub(crate) crc32c: Option<u32>,
    /// Payload bytes the engine moved through the kernel (`sendfile`/`splice`).
    pub(crate) kernel_copied: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_ports_parse_and_refuse() {
        let p: DataPorts = "50000-50010".parse().unwrap();
        assert_eq!(p.bounds(), (50000, 50010));
        assert_eq!(p.to_string(), "50000-50010");
        for bad in ["", "50000", "9-10", "2000-1999", "1-70000", "a-b"] {
            assert!(bad.parse::<DataPorts>().is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn listeners_stay_in_the_range_and_run_out_cleanly() {
        // A port that was free a moment ago makes a one-port range.
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let low = std::net::TcpListener::bind((ip, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ops = ServerOps {
            data_ports: Some(Arc::new(DataPorts::new(low, low))),
            ..ServerOps::default()
        };
        let opts = DataOpts::default();
        let l = ops.listen(ip, &opts).await.unwrap();
        assert_eq!(l.local_addr().unwrap().port(), low);
        let e = ops.listen(ip, &opts).await.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
        assert!(e.to_string().contains("no free data port"), "{e}");
        drop(l);
        assert_eq!(
            ops.listen(ip, &opts)
                .await
                .unwrap()
                .local_addr()
                .unwrap()
                .port(),
            low
        );
    }
}
