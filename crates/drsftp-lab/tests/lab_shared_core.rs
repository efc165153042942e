//! The shared-core topology emulates what it says (a correctness test of the emulation, not a performance
//! test): on a 4-host lab (site A h1-h2, site B h3-h4) with 40 Mbit/s access links and a 60 Mbit/s core, one
//! flow from A to B is held to its host's access rate, and two flows from two A hosts to two B hosts share the
//! core: together no more than it carries, each a fair part of it. Same-site traffic never crosses the core.
//! Without root / TUN / iproute2 / iperf3 the test prints `SKIPPED <test>: <reason>` and returns.

use std::time::Duration;

use drsftp_lab::measure::{iperf3, udp_ping};
use drsftp_lab::{Lab, LabConfig, Topology};
use drsftp_testkit::require_lab;

const ACCESS: f64 = 40e6;
const CORE: f64 = 60e6;

#[test]
fn shared_core_caps_each_host_and_is_shared() {
    require_lab!("shared_core_caps_each_host_and_is_shared");
    if !drsftp_testkit::globus::have("iperf3", "shared_core_caps_each_host_and_is_shared") {
        return;
    }
    // Lab names of this helper start with its name (machine rule); one lab per test process at a time.
    let name = format!("stripecli{}", std::process::id() % 100);
    let mut cfg = LabConfig::new(&name, 4, Duration::from_millis(20), CORE as u64);
    cfg.topology = Topology::SharedCore {
        access_bps: ACCESS as u64,
        site_a: 2,
    };
    let lab = Lab::up(cfg).expect("lab up");

    // The core's delay applies between sites only.
    let far = udp_ping(&lab, 1, 3, 5, Duration::from_millis(5)).unwrap();
    let near = udp_ping(&lab, 1, 2, 5, Duration::from_millis(5)).unwrap();
    let (far_ms, near_ms) = (
        far.min().as_secs_f64() * 1e3,
        near.min().as_secs_f64() * 1e3,
    );
    assert!((19.5..=21.5).contains(&far_ms), "h1->h3 RTT {far_ms} ms");
    assert!(near_ms < 3.0, "h1->h2 RTT {near_ms} ms");

    // One flow: its host's access link is the bottleneck, not the core.
    let one = iperf3(&lab, 1, 3, 5201, &["-t", "4"]).expect("iperf3 h1->h3");
    let r = one.bits_per_second;
    eprintln!("one flow: {:.1} Mbit/s", r / 1e6);
    assert!(
        (ACCESS * 0.7..=ACCESS * 1.1).contains(&r),
        "one flow: {:.1} Mbit/s, access {:.0}",
        r / 1e6,
        ACCESS / 1e6
    );

    // Two flows from two hosts: 2 × access > core, so the core is shared.
    let run = |c: usize, s: usize, port: u16| {
        let lab = &lab;
        move || iperf3(lab, c, s, port, &["-t", "6"]).expect("iperf3")
    };
    let (a, b) = std::thread::scope(|sc| {
        let a = sc.spawn(run(1, 3, 5202));
        let b = sc.spawn(run(2, 4, 5203));
        (a.join().unwrap(), b.join().unwrap())
    });
    let (ra, rb) = (a.bits_per_second, b.bits_per_second);
    let sum = ra + rb;
    let msg = format!(
        "two flows: {:.1} + {:.1} = {:.1} Mbit/s through a {:.0} Mbit/s core",
        ra / 1e6,
        rb / 1e6,
        sum / 1e6,
        CORE / 1e6
    );
    eprintln!("{msg}");
    assert!(sum <= CORE * 1.1, "{msg}");
    assert!(sum >= CORE * 0.75, "the core is used: {msg}");
    assert!(
        ra >= CORE * 0.2 && rb >= CORE * 0.2,
        "each gets a part: {msg}"
    );
    assert!(ra <= ACCESS * 1.1 && rb <= ACCESS * 1.1, "{msg}");

    let st = lab.stats();
    assert!(st.links.is_empty());
    let core = |n: &str| st.named.iter().find(|(x, _)| x == n).unwrap().1;
    assert!(core("core A->B").delivered_bytes > 0);
    assert_eq!(st.named.len(), 2 * 4 + 2);
}
