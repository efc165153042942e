//! Server metrics in the Prometheus text format (`drsftp serve --metrics ADDR`, path `/metrics`): sessions,
//! failed logins, transfers by direction and result, payload bytes in and out, a per-transfer throughput
//! histogram, the socket-buffer bytes (DRS windows under `--buffer drs`) held by running transfers, and blast
//! retransmissions (loss) and duplicates, and the payload bytes the kernel moved between socket and file
//! (`DRSFTP_ZERO_COPY`, which shows whether that path is in use). Nothing here names a user, a path or an address, so the page exposes no
//! secrets; it is still best bound on loopback or a management network. The HTTP side is a few lines of tokio
//! (one request per connection, GET only) rather than an HTTP stack: scrapes are rare and tiny.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::data::Progress;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransferLabels {
    direction: &'static str,
    result: &'static str,
}

/// The counters of one server.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    sessions_active: Gauge,
    sessions: Counter,
    login_failures: Counter,
    transfers: Family<TransferLabels, Counter>,
    bytes_in: Counter,
    bytes_out: Counter,
    throughput: Histogram,
    buffer_bytes: Gauge,
    blast_resent: Counter,
    blast_duplicates: Counter,
    blast_drops: Counter,
    kernel_copied: Counter,
    /// Running transfers' live counters, summed into `buffer_bytes` at each scrape.
    running: Mutex<Vec<Weak<Progress>>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Zeroed counters, registered under the `drsftp_` prefix.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("drsftp");
        let sessions_active = Gauge::default();
        let sessions = Counter::default();
        let login_failures = Counter::default();
        let transfers = Family::<TransferLabels, Counter>::default();
        let bytes_in = Counter::default();
        let bytes_out = Counter::default();
        // 64 KB/s to ~70 GB/s in factors of 4: slow WAN clients to 100 GbE.
        let throughput = Histogram::new(exponential_buckets(65_536.0, 4.0, 11));
        let buffer_bytes = Gauge::default();
        let blast_resent = Counter::default();
        let blast_duplicates = Counter::default();
        let blast_drops = Counter::default();
        let kernel_copied = Counter::default();
        let r = &mut registry;
        r.register(
            "sessions_active",
            "Control connections open now",
            sessions_active.clone(),
        );
        r.register("sessions", "Control connections accepted", sessions.clone());
        r.register(
            "login_failures",
            "Logins refused (wrong password, unknown user, blocked address)",
            login_failures.clone(),
        );
        r.register("transfers", "File transfers finished, by direction (in: uploads, out: downloads) and result (ok, failed, aborted)", transfers.clone());
        r.register(
            "received_bytes",
            "Payload bytes received by file transfers (uploads)",
            bytes_in.clone(),
        );
        r.register(
            "sent_bytes",
            "Payload bytes sent by file transfers (downloads)",
            bytes_out.clone(),
        );
        r.register(
            "transfer_throughput_bytes_per_second",
            "Throughput of each successful file transfer",
            throughput.clone(),
        );
        r.register("data_buffer_bytes", "Socket buffer bytes held by running transfers' data connections (the DRS windows under --buffer drs)", buffer_bytes.clone());
        r.register(
            "blast_resent_datagrams",
            "Blast datagrams sent again after loss",
            blast_resent.clone(),
        );
        r.register(
            "blast_duplicate_datagrams",
            "Blast datagrams that arrived twice (at this server or, for sends, at the client)",
            blast_duplicates.clone(),
        );
        r.register(
            "blast_socket_drops",
            "Blast datagrams the kernel dropped at this server's receive socket",
            blast_drops.clone(),
        );
        r.register(
            "kernel_copied_bytes",
            "Payload bytes moved between socket and file by sendfile/splice instead of through user space (DRSFTP_ZERO_COPY)",
            kernel_copied.clone(),
        );
        Metrics {
            registry,
            sessions_active,
            sessions,
            login_failures,
            transfers,
            bytes_in,
            bytes_out,
            throughput,
            buffer_bytes,
            blast_resent,
            blast_duplicates,
            blast_drops,
            kernel_copied,
            running: Mutex::default(),
        }
    }

    /// A session was accepted; the gauge goes down when the returned guard is dropped.
    pub(crate) fn session(self: &Arc<Self>) -> SessionGauge {
        self.sessions.inc();
        self.sessions_active.inc();
        SessionGauge(self.clone())
    }

    /// A login was refused.
    pub(crate) fn login_failed(&self) {
        self.login_failures.inc();
    }

    /// A file transfer started: its buffers count in `data_buffer_bytes` while it runs.
    pub(crate) fn track(&self, p: &Arc<Progress>) {
        let mut r = self.running.lock().unwrap_or_else(|e| e.into_inner());
        r.retain(|w| w.strong_count() > 0);
        r.push(Arc::downgrade(p));
    }

    /// A file transfer ended.
    pub(crate) fn transfer(&self, sending: bool, result: &'static str, bytes: u64, seconds: f64) {
        let direction = if sending { "out" } else { "in" };
        self.transfers
            .get_or_create(&TransferLabels { direction, result })
            .inc();
        if sending {
            &self.bytes_out
        } else {
            &self.bytes_in
        }
        .inc_by(bytes);
        if result == "ok" && seconds > 0.0 {
            self.throughput.observe(bytes as f64 / seconds);
        }
    }

    /// A blast transfer's counts: datagrams resent, duplicates, kernel drops at our socket.
    pub(crate) fn blast(&self, resent: u64, duplicates: u64, drops: u64) {
        self.blast_resent.inc_by(resent);
        self.blast_duplicates.inc_by(duplicates);
        self.blast_drops.inc_by(drops);
    }

    /// Payload bytes a transfer moved through the kernel (`Progress::kernel_copied`).
    pub(crate) fn kernel_copied(&self, bytes: u64) {
        self.kernel_copied.inc_by(bytes);
    }

    /// The text exposition (format 0.0.4 / OpenMetrics text).
    pub fn render(&self) -> String {
        let held: u64 = {
            let mut r = self.running.lock().unwrap_or_else(|e| e.into_inner());
            r.retain(|w| w.strong_count() > 0);
            r.iter().filter_map(Weak::upgrade).map(|p| p.buffer()).sum()
        };
        self.buffer_bytes.set(held.min(i64::MAX as u64) as i64);
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// Holds one count in `sessions_active`.
#[derive(Debug)]
pub(crate) struct SessionGauge(Arc<Metrics>);

impl Drop for SessionGauge {
    fn drop(&mut self) {
        self.0.sessions_active.dec();
    }
}

/// Serves `GET /metrics` on `listener` until the task is dropped. Other paths get 404, other methods 405; a
/// request must arrive within 5 s and fit in 8 KiB.
pub async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let m = metrics.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            let mut n = 0;
            let head = tokio::time::timeout(Duration::from_secs(5), async {
                while n < buf.len() {
                    let k = sock.read(&mut buf[n..]).await.ok()?;
                    if k == 0 {
                        return None;
                    }
                    n += k;
                    if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                        return Some(());
                    }
                }
                None
            })
            .await;
            if !matches!(head, Ok(Some(()))) {
                return;
            }
            let line = String::from_utf8_lossy(&buf[..n]);
            let mut parts = line.split_whitespace();
            let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let path = target.split('?').next().unwrap_or("");
            let (status, body) = match (method, path) {
                ("GET", "/metrics") => ("200 OK", m.render()),
                ("GET", _) => ("404 Not Found", "see /metrics\n".to_string()),
                _ => ("405 Method Not Allowed", String::new()),
            };
            let reply = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(reply.as_bytes()).await;
            let _ = sock.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_counts() {
        let m = Arc::new(Metrics::new());
        let g = m.session();
        m.login_failed();
        m.transfer(true, "ok", 1 << 20, 0.5);
        m.transfer(false, "failed", 10, 0.1);
        m.blast(3, 2, 1);
        m.kernel_copied(4096);
        let t = m.render();
        for want in [
            "drsftp_sessions_active 1",
            "drsftp_sessions_total 1",
            "drsftp_login_failures_total 1",
            "drsftp_transfers_total{direction=\"out\",result=\"ok\"} 1",
            "drsftp_transfers_total{direction=\"in\",result=\"failed\"} 1",
            "drsftp_sent_bytes_total 1048576",
            "drsftp_received_bytes_total 10",
            "drsftp_transfer_throughput_bytes_per_second_count 1",
            "drsftp_blast_resent_datagrams_total 3",
            "drsftp_kernel_copied_bytes_total 4096",
        ] {
            assert!(t.contains(want), "{want} missing in\n{t}");
        }
        drop(g);
        assert!(m.render().contains("drsftp_sessions_active 0"));
    }
}
