//! drsftp-sys: the only crate with `unsafe` code and OS specifics (socket options, TCP_INFO, TUN, UDP batching,
//! network namespaces, vectored file reads, sendfile and splice, path resolution confined beneath a root, dropping root, the C
//! allocator's tunables).
//! Everything above it is safe, portable Rust.

pub mod ethtool;
pub mod fileio;
pub mod ifaddrs;
pub mod malloc;
pub mod netns;
pub mod privs;
pub mod resolve;
pub mod rlimit;
pub mod sockopt;
pub mod tcp_info;
pub mod tun;
pub mod udp;
pub mod zerocopy;
