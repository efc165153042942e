//! drsftp-lab: the WAN lab. N network namespaces (`drs-NAME-hK`, host K = 198.18.0.K/24 on `tun0`) joined by a
//! user-space forwarder that moves packets between their TUN devices through `drsftp_netem` links (one per
//! direction per host pair) in real time. This kernel has no netem qdisc, hence user space.
//!
//! ```no_run
//! use std::time::Duration;
//! use drsftp_lab::{Lab, LabConfig, skip_if_unavailable};
//!
//! // No root / TUN / iproute2: prints "SKIPPED my_test: <what is missing>" (visible under cargo test) and returns.
//! if skip_if_unavailable("my_test") {
//!     return;
//! }
//! let lab = Lab::up(LabConfig::new(&format!("t{}", std::process::id()), 2, Duration::from_millis(20), 100_000_000))
//!     .unwrap();
//! let out = lab.exec(2, "iperf3").args(["-s", "-1"]).spawn().unwrap();
//! // ... lab.exec(1, "iperf3").args(["-c", &lab.addr(2).to_string()]) ...
//! drop(lab); // processes inside the hosts, namespaces, TUN devices and forwarder are gone (also on panic; a
//!            // watchdog process does the same if this process dies from Ctrl-C or SIGKILL)
//! # drop(out);
//! ```

#![forbid(unsafe_code)]

pub mod daemon;
pub mod fabric;
pub mod forward;
pub mod lab;
pub mod measure;

pub use fabric::Topology;
pub use forward::ForwarderStats;
pub use lab::{
    check_prerequisites, kill_namespace_processes, lab_namespaces, load_profile, namespace_pids,
    netns_name, remove_namespaces, skip_if_unavailable, HostInfo, Lab, LabConfig, LabError,
    TcpReport, TcpSettings, LAB_NET, TUN_TXQUEUELEN,
};
