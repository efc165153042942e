//! GridFTP server driver: the accept loop and its shutdown. Each control connection runs one task
//! ([`conn`]) that pumps bytes through the sans-IO `drsftp_proto::server::ServerSession` and carries out its
//! actions: filesystem requests on blocking threads ([`fs`]) and transfers on the data engine ([`transfer`]) or,
//! for a `BPAS` channel, on the UDP blast data path ([`blast`]). [`users`] checks logins (argon2id) and gives
//! each user its tree; [`limits`] caps sessions and failed logins per address. Security-relevant events are
//! `tracing` events with target `audit`.

mod audit;
mod blast;
#[cfg(test)]
pub(crate) use blast::bind_any_port as blast_bind_for_tests;
mod conn;
mod frontend;
mod fs;
mod kept;
mod limits;
mod listing;
pub mod metrics;
mod ops;
mod transfer;
mod users;
pub mod xferlog;

pub use frontend::{Movers, MOVER_MAX_LINE};
pub use limits::ServerLimits;
pub use metrics::Metrics;
pub use ops::{DataPorts, DataPortsError, Live, ServerOps};
pub use users::{hash_password, Grant, UserEntry, Users, UsersError, UsersFile};
pub use xferlog::TransferLog;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use drsftp_proto::server::ServerConfig;
use drsftp_storage::Storage;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::data::DataOpts;

/// Everything a server needs besides its listener.
#[derive(Debug, Clone)]
pub struct ServerParams {
    /// Session settings (login policy, third-party policy for foreign data addresses, banner, limits, markers).
    pub session: ServerConfig,
    /// Data-channel settings (buffer policy, block size).
    pub data: DataOpts,
    /// The served tree (anonymous sessions, and users without a root of their own).
    pub storage: Arc<dyn Storage>,
    /// Accounts besides anonymous (checked for `Action::CheckLogin`).
    pub users: Arc<Users>,
    /// Session and failed-login limits.
    pub limits: ServerLimits,
    /// Reloadable settings, data-port range, transfer log, metrics.
    pub ops: ServerOps,
    /// A striped frontend's data movers (`--movers`): transfers run on them, this server moves no data.
    pub movers: Option<Arc<Movers>>,
    /// A mover (`--mover`): the only addresses a control connection is accepted from (its frontend's); others
    /// get `421` and are closed before any command is read. Empty: anyone.
    pub control_from: Vec<IpAddr>,
}

impl ServerParams {
    /// `session` and `data` settings serving `storage`, no accounts, default limits.
    pub fn new(session: ServerConfig, data: DataOpts, storage: Arc<dyn Storage>) -> ServerParams {
        ServerParams {
            session,
            data,
            storage,
            users: Arc::default(),
            limits: ServerLimits::default(),
            ops: ServerOps::default(),
            movers: None,
            control_from: Vec::new(),
        }
    }
}

/// The reply to a connection beyond `--max-sessions` / `--max-sessions-per-ip`.
const TOO_MANY: &[u8] = b"421 Too many sessions, try again later.\r\n";

/// The reply to a control connection a mover does not take (not from its frontend).
const NOT_FRONTEND: &[u8] = b"421 This server is a data mover; it serves only its frontend.\r\n";

/// A handle to stop a running server: dropping it or calling [`Shutdown::trigger`] ends the accept loop and
/// every session (running transfers are aborted, sessions get `421`).
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Sender<bool>);

impl Shutdown {
    /// Ask the server to stop.
    pub fn trigger(&self) {
        let _ = self.0.send(true);
    }
}

/// Bind `addr` and return the listener plus its real address (port 0 picks one).
pub async fn bind(addr: SocketAddr) -> std::io::Result<(TcpListener, SocketAddr)> {
    let l = TcpListener::bind(addr).await?;
    let a = l.local_addr()?;
    Ok((l, a))
}

/// Run the server on `listener` until `shutdown` fires. Returns when the accept loop stops; sessions still
/// running are told to close.
pub async fn serve(
    listener: TcpListener,
    params: ServerParams,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let shared = Arc::new(limits::Shared::new(params.limits, params.ops.live.clone()));
    let params = Arc::new(params);
    let mut stop = shutdown.clone();
    loop {
        tokio::select! {
            r = listener.accept() => {
                let (sock, peer) = match r {
                    Ok(x) => x,
                    Err(e) => {
                        // EMFILE and friends: log, back off briefly, keep serving.
                        tracing::warn!("accept: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let from = peer.ip().to_canonical();
                if !params.control_from.is_empty() && !params.control_from.contains(&from) {
                    let _ = sock.try_write(NOT_FRONTEND);
                    tracing::warn!(target: "audit", event = "refused", peer = %peer, reason = "not the frontend");
                    continue;
                }
                let Some(slot) = shared.open_session(peer.ip()) else {
                    // Refused at once, without a task: the greeting-sized reply fits the socket buffer, and
                    // dropping the socket frees the descriptor now.
                    let _ = sock.try_write(TOO_MANY);
                    tracing::info!(target: "audit", event = "refused", peer = %peer, reason = "too many sessions");
                    continue;
                };
                let params = params.clone();
                let stop = shutdown.clone();
                let shared = shared.clone();
                let gauge = params.ops.metrics.as_ref().map(|m| m.session());
                tokio::spawn(async move {
                    // Held for the task's life: given back however the session ends (also on panic or abort).
                    let _slot = slot;
                    let _gauge = gauge;
                    if let Err(e) = conn::run(sock, peer, params, shared, stop).await {
                        tracing::debug!("session {peer}: {e}");
                    }
                });
            }
            r = stop.changed() => {
                // A dropped Shutdown handle also stops the server.
                if r.is_err() || *stop.borrow() { return Ok(()); }
            }
        }
    }
}

/// Start a server on `addr` in the current tokio runtime. Returns its address and the shutdown handle.
pub async fn spawn(
    addr: SocketAddr,
    params: ServerParams,
) -> std::io::Result<(
    SocketAddr,
    Shutdown,
    tokio::task::JoinHandle<std::io::Result<()>>,
)> {
    let (l, a) = bind(addr).await?;
    let (tx, rx) = watch::channel(false);
    let h = tokio::spawn(serve(l, params, rx));
    Ok((a, Shutdown(tx), h))
}
