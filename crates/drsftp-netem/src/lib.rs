//! drsftp-netem: a sans-IO, virtual-time WAN link model (delay, rate with a bounded drop-tail queue, Bernoulli and
//! Gilbert-Elliott loss, jitter, reordering, duplication, time-varying profiles). No threads, sockets or clock reads:
//! every call takes `now: Instant`, so tests drive it with a virtual clock and the lab forwarder with a real one.
//!
//! # Quick start (deterministic test of a sans-IO pair)
//! ```
//! use std::time::{Duration, Instant};
//! use drsftp_netem::{LinkConfig, LossModel, Path, Side, Verdict};
//!
//! let t0 = Instant::now(); // any origin; only differences matter
//! let cfg = LinkConfig::new(Duration::from_millis(50), 10_000_000) // 50 ms one way, 10 Mbit/s
//!     .with_loss(LossModel::Bernoulli { p: 0.0 })
//!     .with_seed(7);
//! let mut path: Path<Vec<u8>> = Path::symmetric(cfg, t0);
//! let v = path.send(t0, Side::A, 1250, vec![0u8; 1250]); // 1250 B at 10 Mbit/s = 1 ms serialisation
//! assert_eq!(v, Verdict::Queued { deliver_at: t0 + Duration::from_millis(51) });
//! assert!(path.poll_deliver(t0 + Duration::from_millis(50), Side::B).is_none());
//! let wake = path.poll_timeout().unwrap(); // sleep (virtually) until then
//! assert_eq!(path.poll_deliver(wake, Side::B).unwrap().len(), 1250);
//! ```
//!
//! Typical event loop: for each endpoint output call `handle_send(now, wire_len, pkt)`; then advance `now` to the
//! minimum of your endpoints' timeouts and `poll_timeout()`, and drain `poll_deliver(now)` into the receiver.
//! `len` is the *wire* size used for serialisation and queue accounting (add header overhead yourself if the
//! payload is not the full packet). See [`Link`] for the exact model and [`Profile`] for the profile text format.

#![forbid(unsafe_code)]

pub mod config;
pub mod link;
pub mod path;
pub mod profile;

pub use config::{parse_queue, LinkConfig, LossModel, ParseError, QueueLimit};
pub use link::{Link, LinkStats, Verdict};
pub use path::{Path, Side};
pub use profile::{Profile, ProfileStep};
