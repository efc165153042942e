//! Early writeback of a file being received: every [`EVERY`] while a receiver runs, the pages it wrote start
//! going to disk ([`FileHandle::start_writeback`]) instead of piling up in the page cache until the final fsync.
//!
//! Why: with the kernel's default dirty limits (10 % of memory before background writeback) a 1 GiB download
//! stays dirty to the end, and the fsync that makes the file durable then writes all of it while the user waits
//! (0.4 s on the lab's disk, 2 % of a 20 s copy; docs/auto-transport.md "The blast probe"). Started as data lands,
//! the disk works while the network does.

use std::sync::Arc;
use std::time::Duration;

use drsftp_storage::FileHandle;
use tokio::task::JoinHandle;

/// How often a receiver's file is told to start writeback: at 10 Gbit/s a quarter second is ~300 MB left for the
/// final fsync at most, and four blocking-pool calls a second cost nothing next to the transfer.
pub(crate) const EVERY: Duration = Duration::from_millis(250);

/// Starts writeback of a file every [`EVERY`] until dropped. Errors end it quietly (a file system without
/// writeback, a pipe): the final fsync still makes the file durable.
#[derive(Debug)]
pub(crate) struct Writeback(JoinHandle<()>);

impl Writeback {
    /// The ticker for `file`, first firing one period from now.
    pub(crate) fn start(file: &Arc<dyn FileHandle>) -> Writeback {
        let file = Arc::clone(file);
        Writeback(tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + EVERY, EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let f = Arc::clone(&file);
                // Off the workers: the call can block while the disk's request queue is full.
                match tokio::task::spawn_blocking(move || f.start_writeback()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::debug!("early writeback stopped: {e}");
                        return;
                    }
                    Err(_) => return,
                }
            }
        }))
    }
}

impl Drop for Writeback {
    fn drop(&mut self) {
        self.0.abort();
    }
}
