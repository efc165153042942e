//! drsftp-testkit: the helpers the workspace's test suites share, so each lives once — deterministic data and
//! SHA-256 ([`data`]), drsftp servers in-process or as the spawned binary ([`server`]), Debian's Globus GridFTP
//! peers ([`globus`]), the WAN-lab guards ([`lab`]) and listening-socket counts ([`sockets`]). Only loopback addresses are used; every child process is
//! killed by its PID on drop. A dev-dependency only (`publish = false`).
//!
//! Features: `server` adds the in-process server (drsftp-io, tokio); `lab` adds the lab guards (drsftp-lab). The
//! sans-IO crates' tests use the rest without either.

#![forbid(unsafe_code)]

#[cfg(feature = "server")]
pub mod ctl;
pub mod data;
pub mod globus;
#[cfg(feature = "lab")]
pub mod lab;
pub mod server;
pub mod sockets;
