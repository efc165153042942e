//! What the client's TCP and blast transfer loops share: the one spawned data task, held so that an early return
//! (an error, a refused command, a dropped future) never leaves it running (dropping the guard aborts it), and the
//! stall watch on its progress.

use std::time::{Duration, Instant};

/// Shared with the server's session tasks (`crate::task`).
pub(super) use crate::task::AbortOnDrop;

/// Whether a running transfer is stalled: its byte count has not moved for `limit`. Other signs of life (a reply,
/// the data task ending) count as movement through [`Stall::alive`].
pub(super) struct Stall {
    last_bytes: u64,
    last_change: Instant,
}

impl Stall {
    /// Watching from now, with the count at `bytes`.
    pub(super) fn new(bytes: u64) -> Stall {
        Stall {
            last_bytes: bytes,
            last_change: Instant::now(),
        }
    }

    /// Something happened: the stall clock restarts.
    pub(super) fn alive(&mut self) {
        self.last_change = Instant::now();
    }

    /// On each tick: `true` once the count (`bytes` now) has not moved for `limit`.
    pub(super) fn stalled(&mut self, bytes: u64, limit: Duration) -> bool {
        if bytes != self.last_bytes {
            self.last_bytes = bytes;
            self.alive();
            false
        } else {
            self.last_change.elapsed() >= limit
        }
    }
}
