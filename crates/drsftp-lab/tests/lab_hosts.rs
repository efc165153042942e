//! Real-lab tests: 4 hosts reach each other, a time-varying profile changes the measured RTT, and a panicking
//! test still tears its lab down. Skip with a printed reason without root / TUN / iproute2.

use std::time::Duration;

use drsftp_lab::measure::udp_ping;
use drsftp_lab::{check_prerequisites, lab_namespaces, Lab, LabConfig};
use drsftp_netem::Profile;

fn skip(test: &str) -> bool {
    match check_prerequisites() {
        Ok(()) => false,
        Err(why) => {
            eprintln!("SKIP {test}: {why}");
            true
        }
    }
}

fn name(suffix: &str) -> String {
    format!("t{}{suffix}", std::process::id() % 1_000_000)
}

#[test]
fn four_hosts_all_pairs_reach_each_other() {
    if skip("four_hosts_all_pairs_reach_each_other") {
        return;
    }
    let lab = Lab::up(LabConfig::new(
        &name("q"),
        4,
        Duration::from_millis(10),
        100_000_000,
    ))
    .unwrap();
    assert_eq!(lab.hosts().len(), 4);
    for (a, b) in [(1, 4), (4, 1), (2, 3), (3, 2), (1, 2)] {
        let p = udp_ping(&lab, a, b, 9, Duration::from_millis(2)).unwrap();
        assert_eq!(p.lost, 0, "h{a}->h{b}");
        let ms = p.median().as_secs_f64() * 1e3;
        assert!((9.8..=10.6).contains(&ms), "h{a}->h{b}: {ms} ms");
    }
    let st = lab.stats();
    assert_eq!(st.links.len(), 4);
}

#[test]
fn profile_changes_rtt_during_the_run() {
    if skip("profile_changes_rtt_during_the_run") {
        return;
    }
    let mut cfg = LabConfig::new(&name("p"), 2, Duration::from_millis(10), 100_000_000);
    cfg.profile = Some(Profile::parse("0s rtt=10ms\n1500ms rtt=60ms\n").unwrap());
    let lab = Lab::up(cfg).unwrap();
    let early = udp_ping(&lab, 1, 2, 5, Duration::from_millis(5)).unwrap();
    std::thread::sleep(Duration::from_millis(1800));
    let late = udp_ping(&lab, 1, 2, 5, Duration::from_millis(5)).unwrap();
    let (e, l) = (
        early.mean().as_secs_f64() * 1e3,
        late.mean().as_secs_f64() * 1e3,
    );
    assert!((9.8..=10.8).contains(&e), "before the step: {e} ms");
    assert!((59.0..=61.2).contains(&l), "after the step: {l} ms");
}

#[test]
fn panic_with_a_lab_in_scope_removes_it() {
    if skip("panic_with_a_lab_in_scope_removes_it") {
        return;
    }
    let n = name("x");
    let n2 = n.clone();
    let r = std::panic::catch_unwind(move || {
        let _lab = Lab::up(LabConfig::new(&n2, 2, Duration::from_millis(1), 0)).unwrap();
        assert_eq!(lab_namespaces(&n2).len(), 2);
        panic!("deliberate");
    });
    assert!(r.is_err());
    assert!(lab_namespaces(&n).is_empty(), "namespaces left after panic");
}
