//! Round trips a `drsftp copy` spends before its data moves, on a 100 ms WAN lab (200 Mbit/s): the server opens
//! a `-p auto` download's first streams at once (they reach the client together, one `add 4` in `--json`'s
//! `auto_actions`, not four `add 1` a round trip apart); AUTH TLS leaves with the connection, before the greeting,
//! and an anonymous login goes out in one write with the file's TYPE I, SIZE and MDTM (the progress bar's size and
//! the resume identity) behind its FEAT: connect, greeting and refused AUTH, login = 3 round trips (it was 5). A
//! count of round trips, not a speed: each costs 100 ms here, far above scheduling noise. The MODE E download's
//! set-up goes out with its PORT and RETR (no SPAS: the server announces `STRIPES 1`), and its final CKSM right
//! behind them. An upload's STOR leaves as soon as PASV is answered (the data connection is made meanwhile), with
//! its SIZE check behind it. Needs root and /dev/net/tun; otherwise
//! prints `SKIPPED <test>: <reason>` and returns.

mod common;

use std::time::Duration;

use common::*;
use drsftp_lab::{Lab, LabConfig};

const T: Duration = Duration::from_secs(120);

#[test]
fn auto_streams_connect_together_and_an_anonymous_login_takes_one_round() {
    drsftp_testkit::require_lab!(
        "auto_streams_connect_together_and_an_anonymous_login_takes_one_round"
    );
    let name = format!("rtts{}", std::process::id() % 10_000);
    let lab = Lab::up(LabConfig::new(
        &name,
        2,
        Duration::from_millis(100),
        200_000_000,
    ))
    .expect("lab up");
    let dir = open_tempdir();
    let (root, out) = (dir.path().join("root"), dir.path().join("out"));
    std::fs::create_dir(&root).unwrap();
    std::fs::create_dir(&out).unwrap();
    let want = random_file(&root.join("f.bin"), 24 << 20, 7);
    let srv = drsftp_serve(
        lab.exec(1, bin().to_str().unwrap()),
        &format!("{}:0", lab.addr(1)),
        &root,
        &[],
    );
    let dst = out.join("f.bin");
    let mut cmd = lab.exec(2, bin().to_str().unwrap());
    cmd.args(["copy", "--json", "--no-resume", &srv.url("/f.bin")])
        .arg(&dst)
        .env("RUST_LOG", "drsftp_io::client::control=debug")
        .env("NO_COLOR", "1");
    let (ok, o, e) = run(&mut cmd, T);
    assert!(ok, "{o} {e}\n{}", srv.log_text());
    assert_eq!(sha256_file(&dst), want);
    let j = json_of(&o);
    let actions = j["auto_actions"].as_array().expect("auto_actions");
    let first = &actions[0];
    assert_eq!(first["action"], "add 4", "{j}");
    let login = j["phases"]["login"].as_f64().unwrap();
    assert!(
        login < 0.35,
        "login took {login} s: more than 3 round trips of 100 ms\n{j}"
    );
    // The control log's send times: USER, SIZE and MDTM leave together, well inside the 100 ms a reply takes,
    // and AUTH TLS a round trip before them (it did not wait for the greeting).
    let sent = |verb: &str| stamps(&e, &format!("-> {verb} "));
    let (auth, user, size, mdtm) = (sent("AUTH"), sent("USER"), sent("SIZE"), sent("MDTM"));
    assert_eq!(
        (auth.len(), user.len(), size.len(), mdtm.len()),
        (1, 1, 1, 1),
        "AUTH {auth:?} USER {user:?} SIZE {size:?} MDTM {mdtm:?}\n{e}"
    );
    for (verb, t) in [("SIZE", size[0]), ("MDTM", mdtm[0])] {
        assert!(
            (t - user[0]).abs() < 0.05,
            "{verb} went out {} s after USER: a round trip of its own\n{e}",
            t - user[0]
        );
    }
    // The download's set-up and its PORT/RETR leave in one write too: the server announces one stripe
    // (`STRIPES 1`), so no SPAS reply is awaited before the client listens.
    let (opts, port) = (sent("OPTS RETR"), sent("PORT"));
    assert!(
        !opts.is_empty() && !port.is_empty() && !e.contains("-> SPAS"),
        "OPTS RETR {opts:?} PORT {port:?}\n{e}"
    );
    assert!(
        (port[0] - opts[0]).abs() < 0.05,
        "PORT went out {} s after OPTS RETR: a round trip of its own\n{e}",
        port[0] - opts[0]
    );
    // The final CKSM rides behind the RETR: the file is small enough for the server to hash in a fraction of a
    // round trip, so it is not held back for the transport rule's verdict (the copy ends before one).
    let (retr, cksm) = (sent("RETR"), sent("CKSM"));
    assert!(
        retr.len() == 1 && cksm.len() == 1 && (cksm[0] - retr[0]).abs() < 0.05,
        "RETR {retr:?} CKSM {cksm:?}: the CKSM waited for the transfer\n{e}"
    );
    assert_eq!(
        j["phases"]["verify"].as_f64().map(|v| v < 0.05),
        Some(true),
        "{j}"
    );
    let gap = user[0] - auth[0];
    assert!(
        (0.08..0.15).contains(&gap),
        "USER {gap} s after AUTH TLS: not the one round trip of the refusal\n{e}"
    );
    // An upload's size check rides behind its STOR with the CKSM: no SIZE round trip after the 226.
    let mut cmd = lab.exec(2, bin().to_str().unwrap());
    cmd.args(["copy", "--json", "--no-resume"])
        .arg(&dst)
        .arg(srv.url("/back.bin"))
        .env("RUST_LOG", "drsftp_io::client::control=debug")
        .env("NO_COLOR", "1");
    let (ok, o, e) = run(&mut cmd, T);
    assert!(ok, "{o} {e}\n{}", srv.log_text());
    assert_eq!(sha256_file(&root.join("back.bin")), want);
    let sent = |verb: &str| stamps(&e, &format!("-> {verb} "));
    let (stor, size) = (sent("STOR"), sent("SIZE"));
    assert!(
        stor.len() == 1 && size.len() == 1 && (size[0] - stor[0]).abs() < 0.05,
        "STOR {stor:?} SIZE {size:?}: the size check waited for the transfer\n{e}"
    );
    // And the STOR leaves as soon as PASV is answered, not a connect's round trip later.
    let pasv_reply = stamps(&e, "<- 227 ");
    assert!(
        pasv_reply.len() == 1 && stor[0] - pasv_reply[0] < 0.05,
        "227 at {pasv_reply:?}, STOR at {stor:?}: the STOR waited for the data connection\n{e}"
    );
}

/// When the control log `log` shows `needle` (`-> VERB ` sent, `<- 227 ` received): seconds into the day of each.
fn stamps(log: &str, needle: &str) -> Vec<f64> {
    log.lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| seconds_of_day(l.split_whitespace().next()?))
        .collect()
}

/// Seconds into the day of a log line's RFC 3339 timestamp (`2026-11-28T06:29:10.906675Z`); ANSI colour codes
/// around it are skipped.
fn seconds_of_day(stamp: &str) -> Option<f64> {
    let t = stamp
        .split('T')
        .nth(1)?
        .trim_end_matches(|c: char| !c.is_ascii_digit());
    let mut f = t.split(':');
    let (h, m, s): (f64, f64, f64) = (
        f.next()?.parse().ok()?,
        f.next()?.parse().ok()?,
        f.next()?.parse().ok()?,
    );
    Some(h * 3600.0 + m * 60.0 + s)
}
