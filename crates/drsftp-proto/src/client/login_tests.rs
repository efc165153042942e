//! Login pipelining tests: with a server whose greeting says drsftp, FEAT rides behind PASS and under TLS the
//! whole login goes in one round; in cleartext a password waits for `331` (a `--tls-required` server refuses the
//! USER), except the client's own anonymous stand-in; other servers get one command at a time.

use super::script_tests::{Scripted, DRSFTP_FEAT};
use super::*;

type H = Scripted;

/// `greeting`, then `Op::Secure` (TLS required, data protected) up to the finished handshake.
fn handshaken(greeting: &str) -> H {
    let mut h = H::new();
    h.reply(greeting);
    h.start(Op::Secure {
        require: true,
        protect_data: true,
    });
    h.expect("AUTH TLS", "234 AUTH TLS successful.\n");
    assert_eq!(h.events(), vec![Event::StartTls]);
    h.s.handle_tls_started(h.now);
    h
}

/// A drsftp greeting and TLS on the control channel (`AUTH TLS` accepted): the secure operation ends with the
/// handshake, and PBSZ, PROT, USER, PASS and FEAT go out in the login's one write; their replies are answered
/// here up to PROT's.
fn drsftp_login() -> H {
    let mut h = handshaken("220 drsftp GridFTP server ready.\n");
    assert!(h.sent().is_empty(), "PBSZ and PROT wait for the login");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Secured(true))]);
    h.start(Op::Login {
        user: "alice".into(),
        pass: "pw".into(),
    });
    assert_eq!(
        h.sent(),
        ["PBSZ 0", "PROT P", "USER alice", "PASS pw", "FEAT"],
        "one round"
    );
    h.reply("200 PBSZ=0\n200 Protection level set to Private.\n");
    assert!(h.events().is_empty(), "PROT does not end the login");
    h
}

#[test]
fn a_drsftp_greeting_gets_the_login_in_one_round_under_tls() {
    let mut h = drsftp_login();
    h.reply("331 Password required for alice.\n");
    assert_eq!(h.events(), vec![]);
    h.reply("230 User alice logged in.\n");
    assert_eq!(h.events(), vec![]);
    h.reply(DRSFTP_FEAT);
    assert!(matches!(&h.events()[..], [Event::Done(Outcome::LoggedIn(f))] if f.drs()));
    assert!(!h.s.is_busy());
}

#[test]
fn in_cleartext_the_password_waits_for_331_and_feat_rides_with_it() {
    let mut h = H::new();
    h.reply("220 drsftp GridFTP server ready.\n");
    h.start(Op::Login {
        user: "alice".into(),
        pass: "pw".into(),
    });
    assert_eq!(
        h.sent(),
        ["USER alice"],
        "no password before the server asks"
    );
    // A server that refuses cleartext logins (`--tls-required`) never sees the password.
    h.reply("530 TLS required: send AUTH TLS first.\n");
    assert!(matches!(&h.events()[..], [Event::Failed(_)]));
    assert_eq!(h.sent(), Vec::<String>::new());
    let mut h = H::new();
    h.reply("220 drsftp GridFTP server ready.\n");
    h.start(Op::Login {
        user: "alice".into(),
        pass: "pw".into(),
    });
    h.expect("USER alice", "331 Password required for alice.\n");
    assert_eq!(h.sent(), ["PASS pw", "FEAT"], "FEAT rides behind PASS");
}

#[test]
fn an_anonymous_login_goes_in_one_round_in_cleartext() {
    // Its password is an e-mail address by convention (RFC 1635), so waiting for 331 protects nothing and
    // costs a round trip per session (0.1 s at 100 ms, for every session of a tree job).
    for user in ["anonymous", "FTP"] {
        let mut h = H::new();
        h.reply("220 drsftp GridFTP server ready.\n");
        h.start(Op::Login {
            user: user.into(),
            pass: ANONYMOUS_PASSWORD.into(),
        });
        assert_eq!(
            h.sent(),
            [format!("USER {user}").as_str(), "PASS drsftp@", "FEAT"],
            "one round"
        );
        h.reply("331 Guest login ok, send your e-mail address as password.\n");
        h.reply("230 User anonymous logged in.\n");
        assert_eq!(h.events(), vec![]);
        h.reply(DRSFTP_FEAT);
        assert!(matches!(&h.events()[..], [Event::Done(Outcome::LoggedIn(f))] if f.drs()));
    }
    // A server refusing cleartext logins answers USER with 530: the pipelined PASS and FEAT are swallowed.
    let mut h = H::new();
    h.reply("220 drsftp GridFTP server ready.\n");
    h.start(Op::Login {
        user: "anonymous".into(),
        pass: ANONYMOUS_PASSWORD.into(),
    });
    assert_eq!(h.sent().len(), 3);
    h.reply("530 TLS required: send AUTH TLS first.\n");
    assert!(matches!(&h.events()[..], [Event::Failed(_)]));
    // A password the user gave for `anonymous` may be a real one: it waits for 331 like any other.
    let mut h = H::new();
    h.reply("220 drsftp GridFTP server ready.\n");
    h.start(Op::Login {
        user: "anonymous".into(),
        pass: "s3cret".into(),
    });
    assert_eq!(h.sent(), ["USER anonymous"]);
    h.reply("530 TLS required: send AUTH TLS first.\n");
    assert!(matches!(&h.events()[..], [Event::Failed(_)]));
    assert!(h.sent().is_empty(), "the password never went out");
}

#[test]
fn a_refused_pipelined_login_fails_and_its_feat_is_swallowed() {
    let mut h = drsftp_login();
    h.reply("331 Password required for alice.\n530 Login incorrect.\n");
    assert!(matches!(
        &h.events()[..],
        [Event::Failed(ClientError::Refused { reply, .. })] if reply.code == 530
    ));
    // The FEAT behind the refused PASS is answered later: it must not answer the next command.
    h.start(Op::Login {
        user: "alice".into(),
        pass: "pw2".into(),
    });
    assert_eq!(h.sent(), ["USER alice", "PASS pw2", "FEAT"]);
    h.reply("211-Extensions supported:\n SIZE\n211 End.\n");
    assert_eq!(h.events(), vec![], "the old FEAT's reply is dropped");
    h.reply("331 Password required for alice.\n230 User alice logged in.\n");
    h.reply(DRSFTP_FEAT);
    assert!(matches!(&h.events()[..], [Event::Done(Outcome::LoggedIn(f))] if f.drs()));
}

#[test]
fn a_user_accepted_without_password_makes_the_pipelined_pass_moot() {
    let mut h = drsftp_login();
    h.reply("230 User alice logged in.\n503 Already logged in.\n");
    assert_eq!(h.events(), vec![], "PASS's 503 is not a failure");
    h.reply(DRSFTP_FEAT);
    assert!(matches!(
        &h.events()[..],
        [Event::Done(Outcome::LoggedIn(_))]
    ));
}

#[test]
fn other_greetings_get_the_login_one_command_at_a_time() {
    let mut h = H::new();
    h.reply("220 vm GridFTP Server 13.24 [Grid Community Toolkit 6.2] ready.\n");
    h.start(Op::Login {
        user: "alice".into(),
        pass: "pw".into(),
    });
    assert_eq!(h.sent(), ["USER alice"]);
    h.reply("331 Password required.\n");
    assert_eq!(h.sent(), ["PASS pw"]);
    h.reply("230 Logged in.\n");
    assert_eq!(h.sent(), ["FEAT"]);
}

const STAT: [&str; 3] = ["TYPE I", "SIZE /d/f", "MDTM /d/f"];

/// `greeting`, the copy's TYPE I/SIZE/MDTM set to ride behind the login, and the login as `user` started.
fn login_with_stat(greeting: &str, user: &str, pass: &str) -> H {
    let mut h = H::new();
    h.reply(greeting);
    h.s.set_after_login(STAT.iter().map(|c| c.to_string()).collect());
    h.start(Op::Login {
        user: user.into(),
        pass: pass.into(),
    });
    h
}

/// What a copy asks first (TYPE I, SIZE, MDTM) rides behind a pipelined login's FEAT: the login ends when their
/// replies are in, one round trip for all of it, and they are kept for the caller, refusals included.
#[test]
fn commands_set_for_after_login_ride_behind_feat_and_their_replies_are_kept() {
    let mut h = login_with_stat(
        "220 drsftp GridFTP server ready.\n",
        "anonymous",
        ANONYMOUS_PASSWORD,
    );
    let mut want = vec!["USER anonymous", "PASS drsftp@", "FEAT"];
    want.extend(STAT);
    assert_eq!(h.sent(), want, "one write");
    h.reply("331 Guest login ok.\n230 Logged in.\n");
    h.reply(DRSFTP_FEAT);
    assert_eq!(
        h.events(),
        vec![],
        "the login waits for the commands behind FEAT"
    );
    h.reply("200 Type set to I.\n213 1048576\n550 /d/f: no modification time.\n");
    assert!(matches!(&h.events()[..], [Event::Done(Outcome::LoggedIn(f))] if f.drs()));
    let r = h.s.take_after_login();
    assert_eq!(
        r.iter().map(|r| r.code).collect::<Vec<_>>(),
        [200, 213, 550]
    );
    assert_eq!(r[1].text(), "1048576");
    assert!(h.s.take_after_login().is_empty(), "taken once");
    assert!(!h.s.is_busy());
    // A password that must wait for 331: the commands still go with PASS and FEAT.
    let mut h = login_with_stat("220 drsftp GridFTP server ready.\n", "alice", "pw");
    h.expect("USER alice", "331 Password required for alice.\n");
    let mut want = vec!["PASS pw", "FEAT"];
    want.extend(STAT);
    assert_eq!(h.sent(), want);
}

/// A refused login ends at once, its commands' replies are swallowed (they answer nothing the caller asks
/// next) and none are kept; with a server that is not drsftp they never go out at all.
#[test]
fn after_login_commands_are_dropped_with_a_refused_login_or_another_server() {
    let mut h = login_with_stat(
        "220 drsftp GridFTP server ready.\n",
        "anonymous",
        ANONYMOUS_PASSWORD,
    );
    assert_eq!(h.sent().len(), 6);
    h.reply("530 Anonymous logins are off.\n");
    assert!(matches!(&h.events()[..], [Event::Failed(_)]));
    assert!(h.s.take_after_login().is_empty());
    // PASS, FEAT and the three commands answer later and must not answer the next operation.
    h.start(Op::Size("/other".into()));
    assert_eq!(h.sent(), ["TYPE I", "SIZE /other"]);
    h.reply("530 Not logged in.\n211 End.\n530 Not logged in.\n530 Not logged in.\n530 Not logged in.\n");
    assert_eq!(h.events(), vec![], "all swallowed");
    h.reply("200 Type set to I.\n213 7\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Size(7))]);
    // Another server: one command at a time, and nothing behind FEAT.
    let mut h = login_with_stat(
        "220 vm GridFTP Server 13.24 [Grid Community Toolkit 6.2] ready.\n",
        "alice",
        "pw",
    );
    h.expect("USER alice", "331 Password required.\n");
    h.expect("PASS pw", "230 Logged in.\n");
    h.expect("FEAT", "211 End.\n");
    assert!(matches!(
        &h.events()[..],
        [Event::Done(Outcome::LoggedIn(_))]
    ));
    assert!(h.sent().is_empty(), "nothing behind FEAT");
    assert!(h.s.take_after_login().is_empty());
}

/// PBSZ and PROT lead the login's write under TLS: a refused PROT fails the login there (nothing was moved, and
/// no data connection may go out unprotected), and the replies to the USER, PASS and FEAT behind it are swallowed.
/// A server that is not drsftp gets PBSZ and PROT inside `Op::Secure`, one at a time, as before.
#[test]
fn a_refused_prot_fails_the_login_it_leads() {
    let mut h = handshaken("220 drsftp GridFTP server ready.\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Secured(true))]);
    h.start(Op::Login {
        user: "alice".into(),
        pass: "pw".into(),
    });
    assert_eq!(h.sent().len(), 5);
    h.reply("200 PBSZ=0\n534 PROT P refused.\n");
    assert!(matches!(
        &h.events()[..],
        [Event::Failed(ClientError::Refused { reply, .. })] if reply.code == 534
    ));
    h.start(Op::Size("/f".into()));
    assert_eq!(h.sent(), ["TYPE I", "SIZE /f"]);
    h.reply("331 Password required.\n230 Logged in.\n211 End.\n");
    assert!(h.events().is_empty(), "the login's replies are swallowed");
    h.reply("200 Type set to I.\n213 5\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Size(5))]);
    // Another server: PBSZ, then PROT, inside the secure operation.
    let mut h = handshaken("220 vm GridFTP Server 13.24 ready.\n");
    h.expect("PBSZ 0", "200 PBSZ=0\n");
    h.expect("PROT P", "200 Protection level set to Private.\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Secured(true))]);
    h.start(Op::Login {
        user: "alice".into(),
        pass: "pw".into(),
    });
    assert_eq!(h.sent(), ["USER alice"]);
}
