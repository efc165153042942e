//! Striped transfers (GFD.20 SPAS/SPOR) from the client's side, on scripted servers: the dialogues a Globus
//! frontend with two data nodes answered (docs/striping.md "Client"), a one-stripe server that gets today's
//! PORT/PASV, refusals that fall back, and replies that must not be trusted.

use super::script_tests::{tcp_spec, Scripted, DRSFTP_FEAT};
use super::*;

/// A Globus frontend's FEAT (it lists SPAS and SPOR).
const FRONTEND_FEAT: &str =
    "211-Extensions supported\n PARALLEL\n SIZE\n ERET\n ESTO\n SPAS\n SPOR\n211 End.\n";

const TWO_STRIPES: &str =
    "229-Entering Striped Passive Mode.\n 127,0,0,3,206,115\n 127,0,0,2,184,251\n229 End\n";

fn spec(direction: Direction, streams: u32) -> TransferSpec {
    TransferSpec {
        stripes: true,
        ..tcp_spec(direction, "/d/f", TransferMode::Extended, streams)
    }
}

fn stripe_addrs() -> Vec<std::net::SocketAddr> {
    vec![
        "127.0.0.3:52851".parse().unwrap(),
        "127.0.0.2:47355".parse().unwrap(),
    ]
}

#[test]
fn striped_download_listens_per_stripe_and_sends_spor() {
    let mut h = Scripted::login(FRONTEND_FEAT);
    h.start(Op::Transfer(spec(Direction::Download, 2)));
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect("MODE E", "200 Mode set to E.\n");
    h.expect(
        "OPTS RETR Parallelism=2,2,2;",
        "200 OPTS Command Successful.\n",
    );
    h.expect("SPAS", TWO_STRIPES);
    assert_eq!(
        h.events(),
        vec![Event::ListenStriped {
            peers: stripe_addrs()
        }]
    );
    assert_eq!(h.s.stripes(), 2);
    assert_eq!(
        h.sent(),
        Vec::<String>::new(),
        "nothing before the listeners"
    );
    assert_eq!(h.s.poll_timeout(), None, "no reply deadline while binding");
    // A plain Listen answer does not count: the session waits for the striped one.
    h.s.handle_listening(h.now, "127.0.0.1:1025".parse().unwrap());
    assert_eq!(h.sent(), Vec::<String>::new());
    h.s.handle_listening_striped(
        h.now,
        &[
            "127.0.0.1:1025".parse().unwrap(),
            "127.0.0.1:1026".parse().unwrap(),
        ],
    );
    h.expect(
        "SPOR 127,0,0,1,4,1 127,0,0,1,4,2",
        "200 PORT Command successful.\n",
    );
    h.expect(
        "RETR /d/f",
        "150 Beginning transfer.\n226 Transfer Complete.\n",
    );
    assert!(matches!(
        h.events().last(),
        Some(Event::Done(Outcome::Transferred(_)))
    ));
}

#[test]
fn striped_upload_connects_to_every_stripe() {
    let mut h = Scripted::login(FRONTEND_FEAT);
    let mut sp = spec(Direction::Upload, 3);
    sp.alloc = Some(100);
    h.start(Op::Transfer(sp));
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect("MODE E", "200 Mode set to E.\n");
    h.expect("SPAS", TWO_STRIPES);
    assert_eq!(
        h.events(),
        vec![Event::ConnectStriped {
            addrs: stripe_addrs(),
            streams: 3
        }]
    );
    assert_eq!(h.sent(), Vec::<String>::new());
    h.s.handle_data_ready(h.now);
    h.expect("ALLO 100", "200 ALLO command successful.\n");
    h.expect(
        "STOR /d/f",
        "150 Beginning transfer.\n226 Transfer Complete.\n",
    );
    assert!(matches!(
        h.events().last(),
        Some(Event::Done(Outcome::Transferred(_)))
    ));
}

#[test]
fn one_stripe_is_todays_port_and_pasv() {
    let one = "229-Entering Striped Passive Mode.\n 127,0,0,1,4,1\n229 End\n";
    let mut h = Scripted::login(FRONTEND_FEAT);
    h.start(Op::Transfer(spec(Direction::Download, 1)));
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect("MODE E", "200 Mode set to E.\n");
    h.expect(
        "OPTS RETR Parallelism=1,1,1;",
        "200 OPTS Command Successful.\n",
    );
    h.expect("SPAS", one);
    assert_eq!(h.events(), vec![Event::Listen]);
    h.s.handle_listening(h.now, "127.0.0.1:2000".parse().unwrap());
    h.expect("PORT 127,0,0,1,7,208", "200 PORT Command successful.\n");
    h.expect("RETR /d/f", "226 Transfer Complete.\n");
    h.events();

    h.start(Op::Transfer(spec(Direction::Upload, 2)));
    h.expect("SPAS", one);
    assert_eq!(
        h.events(),
        vec![Event::Connect {
            addr: "127.0.0.1:1025".parse().unwrap(),
            streams: 2
        }]
    );
}

#[test]
fn refused_spas_falls_back_and_no_feat_no_spas() {
    let mut h = Scripted::login(FRONTEND_FEAT);
    h.start(Op::Transfer(spec(Direction::Upload, 2)));
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect("MODE E", "200 Mode set to E.\n");
    h.expect("SPAS", "500 Command not understood.\n");
    assert!(matches!(&h.events()[..], [Event::Notice(n)] if n.contains("not striping")));
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,4,1)\n");
    assert!(matches!(&h.events()[..], [Event::Connect { .. }]));

    // A server without SPAS in FEAT never sees it; nor does a transfer that did not ask to stripe.
    let mut h = Scripted::login(DRSFTP_FEAT);
    h.start(Op::Transfer(spec(Direction::Upload, 2)));
    let cmds = h.sent();
    assert!(cmds.iter().all(|c| c != "SPAS"), "{cmds:?}");
    let mut h = Scripted::login(FRONTEND_FEAT);
    let mut sp = spec(Direction::Upload, 2);
    sp.stripes = false;
    h.start(Op::Transfer(sp));
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect("MODE E", "200 Mode set to E.\n");
    h.expect("PASV", "227 Entering Passive Mode (127,0,0,1,4,1)\n");
}

#[test]
fn malformed_spas_reply_fails_the_transfer() {
    let mut h = Scripted::login(FRONTEND_FEAT);
    h.start(Op::Transfer(spec(Direction::Download, 1)));
    h.expect("TYPE I", "200 Type set to I.\n");
    h.expect("MODE E", "200 Mode set to E.\n");
    h.expect(
        "OPTS RETR Parallelism=1,1,1;",
        "200 OPTS Command Successful.\n",
    );
    h.expect(
        "SPAS",
        "229-Entering Striped Passive Mode.\n 127,0,0,3,0,0\n229 End\n",
    );
    let ev = h.events();
    assert!(
        matches!(&ev[..], [Event::Failed(ClientError::BadReply { command, .. })] if command == "SPAS"),
        "{ev:?}"
    );
}

#[test]
fn a_striped_download_asks_for_its_final_cksm_afterwards() {
    // A drsftp frontend: the set-up is pipelined, but with two movers no CKSM rides behind RETR (the frontend
    // would answer it while the movers' last bytes may still be in flight).
    let mut h = Scripted::login(
        "211-Extensions supported:\n PARALLEL\n ERET\n ESTO\n SPAS\n SPOR\n DRS\n CKSM CRC32C;\n211 End.\n",
    );
    h.s.set_trailing_checksum("CRC32C");
    h.start(Op::Transfer(spec(Direction::Download, 2)));
    let setup = h.sent();
    assert_eq!(setup.last().map(String::as_str), Some("SPAS"), "{setup:?}");
    let oks = "200 ok\n".repeat(setup.len() - 1);
    h.reply(&format!("{oks}{TWO_STRIPES}"));
    assert!(matches!(&h.events()[..], [Event::ListenStriped { .. }]));
    h.s.handle_listening_striped(
        h.now,
        &[
            "127.0.0.1:1025".parse().unwrap(),
            "127.0.0.1:1026".parse().unwrap(),
        ],
    );
    assert_eq!(
        h.sent(),
        ["SPOR 127,0,0,1,4,1 127,0,0,1,4,2", "RETR /d/f"],
        "no CKSM behind a striped RETR"
    );
    h.reply("200 PORT Command successful.\n150 Go.\n226 Transfer Complete.\n");
    assert_eq!(h.report().checksum, None);
    assert_eq!(h.sent(), Vec::<String>::new());
}

/// A drsftp server lists SPAS and SPOR and says how many stripes it has (`STRIPES n`). Told 1, the client does
/// not ask SPAS: the download listens at once and its set-up, PORT and RETR leave in one write (one round trip
/// less). Told more, or not told (an older drsftp server), it asks SPAS first, as GFD.20 has it.
#[test]
fn a_drsftp_server_with_one_stripe_is_not_asked_spas() {
    let feat =
        |stripes: &str| DRSFTP_FEAT.replace(" DRS\n", &format!(" DRS\n SPAS\n SPOR\n{stripes}"));
    let setup = ["TYPE I", "MODE E", "OPTS RETR Parallelism=2,2,2;"];
    let mut h = Scripted::login(&feat(" STRIPES 1\n"));
    assert_eq!(h.s.features().stripes(), Some(1));
    h.start(Op::Transfer(spec(Direction::Download, 2)));
    assert_eq!(h.sent(), setup);
    assert_eq!(h.events(), vec![Event::Listen]);
    h.s.handle_listening(h.now, "127.0.0.1:1025".parse().unwrap());
    assert_eq!(h.sent(), ["PORT 127,0,0,1,4,1", "RETR /d/f"], "same round");
    h.reply("200 ok\n200 ok\n200 ok\n200 PORT ok\n150 go\n226 done\n");
    assert!(matches!(
        h.events().last(),
        Some(Event::Done(Outcome::Transferred(_)))
    ));
    for stripes in [" STRIPES 2\n", ""] {
        let mut h = Scripted::login(&feat(stripes));
        h.start(Op::Transfer(spec(Direction::Download, 2)));
        let mut want = setup.to_vec();
        want.push("SPAS");
        assert_eq!(h.sent(), want, "{stripes:?}");
        assert_eq!(h.events(), vec![], "the listeners wait for SPAS's reply");
    }
}
