//! Sans-IO GridFTP server session: control-line framing, one file per FTP verb (under `verbs/`, registered in
//! `verbs/mod.rs`), and the session state machine that turns command bytes plus `now` into reply bytes and
//! [`Action`]s for the driver (filesystem requests, data-channel set-up, transfers). It owns no sockets and no
//! files and reads no clock.
//!
//! ```text
//!   driver ──handle_input(now, bytes)──▶ ServerSession ──poll_transmit()──▶ reply bytes ──▶ client
//!                                                      ──poll_action()───▶ Fs / Listen / Transfer / Abort / Close
//!   driver ──handle_fs / handle_listening / handle_progress / handle_transfer_done / handle_timeout──▶
//! ```
//!
//! The driver contract (when to call which `handle_*`) is in the [`ServerSession`] docs (`session.rs`).

mod ctx;
mod error;
mod framing;
mod listing;
mod reply;
mod session;
mod stripes;
mod transfer;
mod types;
mod verbs;

#[cfg(any(test, feature = "drive"))]
pub mod drive;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod interop;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod testutil;

pub use ctx::Rest;
pub use listing::{ListFormat, ListKind};
pub use session::{ServerSession, MAX_QUEUED_COMMANDS};
pub use stripes::{StripeLayout, DEFAULT_STRIPE_BLOCK, MAX_PIECES};
pub use types::*;
