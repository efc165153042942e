//! The set-up the `lab_auto_*` tests (`--transport auto` on the WAN lab) share: a 2-host lab with or without
//! random loss, the directories a test works in, the path-profile key of a server and a lossy profile for it, and
//! UDP blackholed on arrival at a lab host (blast blocked by policy while TCP passes).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use drsftp_io::client::profile::PathProfile;
use drsftp_lab::{Lab, LabConfig};
use drsftp_netem::LossModel;
use drsftp_testkit::server::ServerProcess;

/// A 2-host lab named `<prefix><pid>` (unique per test process) of `rtt_ms` and `rate` bit/s, with Bernoulli
/// loss `loss` on the link when it is above 0.
pub fn two_host_lab(prefix: &str, rtt_ms: u64, rate: u64, loss: f64) -> Lab {
    let name = format!("{prefix}{}", std::process::id() % 10_000);
    let mut cfg = LabConfig::new(&name, 2, Duration::from_millis(rtt_ms), rate);
    if loss > 0.0 {
        cfg.link = cfg.link.with_loss(LossModel::Bernoulli { p: loss });
    }
    Lab::up(cfg).expect("lab up")
}

/// The directories `names` created in `dir`.
pub fn subdirs<const N: usize>(dir: &Path, names: [&str; N]) -> [PathBuf; N] {
    names.map(|d| {
        let p = dir.join(d);
        std::fs::create_dir(&p).unwrap();
        p
    })
}

/// The key the client's profile store files `srv` under (`host:port`).
pub fn profile_key(srv: &ServerProcess) -> String {
    srv.url("/")
        .trim_start_matches("ftp://")
        .trim_end_matches('/')
        .to_string()
}

/// A calibration of `key` that says the path is lossy (1 % at 50 ms, 100 Mbit/s) and is older than any path
/// memory, so a copy started with it alone begins on blast.
pub fn lossy_profile(key: &str) -> PathProfile {
    PathProfile {
        host_port: key.to_string(),
        rtt_ms: 50.0,
        rate_bps: 100e6,
        c1: None,
        c2: None,
        fit_mean_rel_err: None,
        fit_max_rel_err: None,
        points: 0,
        timestamp: 0,
        loss: Some(0.01),
    }
}

/// Drops every UDP datagram arriving at lab host `host` over its tunnel: an input rule ahead of the local table
/// (which moves from preference 0 to 100), so blast datagrams or acks vanish while TCP still passes.
pub fn blackhole_udp_into(lab: &Lab, host: usize) {
    let ns = &lab.host(host).netns;
    let ip = |args: &[&str]| {
        let s = Command::new("ip")
            .args(["netns", "exec", ns, "ip", "rule"])
            .args(args)
            .status()
            .unwrap();
        assert!(s.success(), "ip rule {args:?}");
    };
    ip(&["add", "pref", "100", "lookup", "local"]);
    ip(&["del", "pref", "0", "lookup", "local"]);
    ip(&[
        "add",
        "pref",
        "10",
        "iif",
        "tun0",
        "ipproto",
        "udp",
        "blackhole",
    ]);
}
