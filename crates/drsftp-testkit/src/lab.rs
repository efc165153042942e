//! WAN-lab guards for tests: skip with `SKIPPED <test>: <reason>` when the lab cannot run (no root, TUN or
//! iproute2), and per-process lab names, so concurrent test binaries never share namespaces.

use std::time::Duration;

pub use drsftp_lab::skip_if_unavailable;
use drsftp_lab::{Lab, LabConfig};

/// Returns from the calling test, after printing `SKIPPED <test>: <reason>`, when the lab cannot run here.
#[macro_export]
macro_rules! require_lab {
    ($test:expr) => {
        if $crate::lab::skip_if_unavailable($test) {
            return;
        }
    };
}

/// A lab name unique to this test process: `t<pid mod 10^6><suffix>`.
pub fn name(suffix: &str) -> String {
    format!("t{}{suffix}", std::process::id() % 1_000_000)
}

/// A lab named [`name`]`(suffix)` of `hosts` hosts with `rtt` and `rate` (bit/s), up; panics if it will not come
/// up (call [`require_lab!`] first).
pub fn up(suffix: &str, hosts: usize, rtt: Duration, rate: u64) -> Lab {
    Lab::up(LabConfig::new(&name(suffix), hosts, rtt, rate)).expect("lab up")
}
