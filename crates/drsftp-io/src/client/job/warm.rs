//! Warm control sessions: the logins a job's workers will need, started while the source tree is still being
//! listed and handed to the workers when it ends, so the first files move one listing after the start instead of
//! a listing plus a QUIT plus a fresh login (six round trips, 0.6 s at 100 ms) later. The walk's own sessions go
//! back into the same pool instead of quitting.

use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;

use super::{run, JobOptions, Server};
use crate::client::Client;

/// Which end of the job a session is logged in to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Side {
    Src,
    Dst,
}

/// A session logged in already, or a login under way (its failure only means the worker logs in itself).
pub(super) enum Slot {
    Ready(Box<Client>),
    Pending(JoinHandle<Option<Client>>),
}

impl Slot {
    /// The logged-in session, waiting for its login if need be.
    pub(super) async fn session(self) -> Option<Client> {
        match self {
            Slot::Ready(c) => Some(*c),
            Slot::Pending(h) => h.await.ok().flatten(),
        }
    }

    /// Ends it: QUIT for a session that is up, the login dropped for one still under way.
    async fn close(self) {
        let c = match self {
            Slot::Ready(c) => *c,
            Slot::Pending(h) if h.is_finished() => match h.await {
                Ok(Some(c)) => c,
                _ => return,
            },
            Slot::Pending(h) => {
                h.abort();
                return;
            }
        };
        if let Err(e) = c.quit().await {
            tracing::debug!("QUIT: {e}");
        }
    }
}

#[derive(Default)]
struct Sides {
    src: Vec<Slot>,
    dst: Vec<Slot>,
}

impl Sides {
    fn side(&mut self, side: Side) -> &mut Vec<Slot> {
        match side {
            Side::Src => &mut self.src,
            Side::Dst => &mut self.dst,
        }
    }
}

/// The job's pool of warm sessions; clones share it. Empty unless a remote walk filled it.
#[derive(Clone, Default)]
pub struct Warm(Arc<Mutex<Sides>>);

impl fmt::Debug for Warm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (s, d) = self
            .0
            .lock()
            .map(|g| (g.src.len(), g.dst.len()))
            .unwrap_or_default();
        write!(f, "Warm {{ src: {s}, dst: {d} }}")
    }
}

impl Warm {
    /// Starts `n` logins to `server` in the background (no retries: a failed one leaves its worker to log in).
    pub(super) fn start(&self, side: Side, server: &Server, opts: &JobOptions, n: usize) {
        let Ok(mut g) = self.0.lock() else {
            return;
        };
        for _ in 0..n {
            let (s, o) = (server.clone(), opts.clone());
            g.side(side).push(Slot::Pending(tokio::spawn(async move {
                run::connect(&s, &o)
                    .await
                    .inspect_err(|e| tracing::debug!("warm session to {}: {e}", s.authority))
                    .ok()
            })));
        }
    }

    /// Gives back a session that is logged in (the walk's, once it has listed).
    pub(super) fn put(&self, side: Side, c: Client) {
        match self.0.lock() {
            Ok(mut g) => g.side(side).push(Slot::Ready(Box::new(c))),
            Err(_) => drop(c),
        }
    }

    /// One slot of `side`, if any is left (logged-in ones first).
    pub(super) fn take(&self, side: Side) -> Option<Slot> {
        let mut g = self.0.lock().ok()?;
        let v = g.side(side);
        let i = v
            .iter()
            .position(|s| matches!(s, Slot::Ready(_)))
            .unwrap_or(0);
        (!v.is_empty()).then(|| v.remove(i))
    }

    /// Up to `n` logged-in sessions of `side`, waiting for logins under way; failed logins are skipped.
    pub(super) async fn sessions(&self, side: Side, n: usize) -> Vec<Client> {
        let mut out = Vec::new();
        while out.len() < n {
            let Some(slot) = self.take(side) else {
                break;
            };
            out.extend(slot.session().await);
        }
        out
    }

    /// Ends every session left (the job needed fewer than were warmed).
    pub(super) async fn close(&self) {
        let left: Vec<Slot> = match self.0.lock() {
            Ok(mut g) => {
                let Sides { src, dst } = std::mem::take(&mut *g);
                src.into_iter().chain(dst).collect()
            }
            Err(_) => return,
        };
        join_all(left.into_iter().map(Slot::close)).await;
    }
}

/// Runs the futures concurrently and waits for all (QUITs each cost a round trip; no reason to queue them).
async fn join_all<F: std::future::Future<Output = ()> + Send + 'static>(
    fs: impl Iterator<Item = F>,
) {
    let mut set = tokio::task::JoinSet::new();
    for f in fs {
        set.spawn(f);
    }
    while set.join_next().await.is_some() {}
}
