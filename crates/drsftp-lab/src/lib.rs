//! drsftp-lab: the WAN lab. N network namespaces (`drs-NAME-hK`, host K = 198.18.0.K/24 on `tun0`) joined by a
//! user-space forwarder that moves packets between their TUN devices through `drsftp_netem` links (one per
//! direction per host pair) in real time. This kernel has no netem qdisc, hence user space.
//!
//! ```no_run
//! use std::time::Duration;
//! use drsftp_lab::{Lab, LabConfig, check_prerequisites};
//!
//! if let Err(why) = check_prerequisites() {
//!     eprintln!("SKIP: {why}");
//!     return;
//! }
//! let lab = Lab::up(LabConfig::new(&format!("t{}", std::process::id()), 2, Duration::from_millis(20), 100_000_000))
//!     .unwrap();
//! let out = lab.exec(2, "iperf3").args(["-s", "-1"]).spawn().unwrap();
//! // ... lab.exec(1, "iperf3").args(["-c", &lab.addr(2).to_string()]) ...
//! drop(lab); // namespaces, TUN devices and forwarder are gone (also on panic; a watchdog covers SIGKILL)
//! # drop(out);
//! ```

pub mod bench;
pub mod daemon;
pub mod forward;
pub mod lab;
pub mod measure;

pub use forward::ForwarderStats;
pub use lab::{
    check_prerequisites, lab_namespaces, netns_name, remove_namespaces, HostInfo, Lab, LabConfig,
    LabError, TcpReport, TcpSettings, LAB_NET,
};
