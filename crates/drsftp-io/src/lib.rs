//! drsftp-io: the one thin tokio layer. It owns every socket and file handle and drives the sans-IO cores in
//! drsftp-proto, drsftp-tune and drsftp-blast: `server` runs `drsftp serve`, `client` runs `drsftp copy`/`ls`,
//! `data` moves bytes on TCP data channels (stream mode and MODE E) for both, `blast` on the UDP blast channel.

#![forbid(unsafe_code)]

pub mod blast;
pub mod client;
pub mod data;
pub mod drs;
mod private_file;
pub mod server;
mod task;
pub mod tls;
