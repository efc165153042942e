//! drsftp-proto: the sans-IO GridFTP protocol cores. Control-channel client ([`client`]) and server ([`server`])
//! session state machines, the MODE E block codec ([`mode_e`]) and byte range sets for restart markers
//! ([`ranges`]), the TLS record layer of data connections ([`tls_records`]). No sockets, no threads, no clock reads: bytes and `now` come in, replies and actions go out.

#![forbid(unsafe_code)]

pub mod civil;
pub mod client;
mod hostport;
pub mod mode_e;
pub mod ranges;
pub mod server;
pub mod tls_records;
