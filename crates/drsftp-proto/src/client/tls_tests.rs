//! `Op::Secure` (explicit FTPS, RFC 4217) against a scripted server: the command order (AUTH TLS with no FEAT
//! before it, the driver's handshake, PBSZ 0, PROT P, all before USER), `require` against a server without TLS,
//! a busy server's 421, and bytes behind the `234` refused.

use super::script_tests::Scripted;
use super::*;

fn greeted() -> Scripted {
    let mut h = Scripted::new();
    h.reply("220 ready.\n");
    h
}

#[test]
fn secure_runs_auth_handshake_pbsz_prot_in_order() {
    let mut h = greeted();
    h.start(Op::Secure {
        require: true,
        protect_data: true,
    });
    h.expect("AUTH TLS", "234 AUTH TLS successful.\n");
    // Nothing goes out until the driver says the handshake is done.
    assert_eq!(h.events(), vec![Event::StartTls]);
    assert!(h.sent().is_empty());
    h.s.handle_tls_started(h.now);
    h.expect("PBSZ 0", "200 PBSZ=0\n");
    h.expect("PROT P", "200 Protection level set to Private.\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Secured(true))]);
    // Login follows as usual.
    h.start(Op::Login {
        user: "u".into(),
        pass: "p".into(),
    });
    assert_eq!(h.sent(), ["USER u"]);
}

#[test]
fn a_refused_auth_tls_leaves_auto_clear_and_fails_require() {
    for refusal in [
        "500 Unknown command.\n",
        "504 Unknown security mechanism.\n",
    ] {
        let mut h = greeted();
        h.start(Op::Secure {
            require: false,
            protect_data: true,
        });
        h.expect("AUTH TLS", refusal);
        assert_eq!(h.events(), vec![Event::Done(Outcome::Secured(false))]);
        let mut h = greeted();
        h.start(Op::Secure {
            require: true,
            protect_data: true,
        });
        h.expect("AUTH TLS", refusal);
        assert_eq!(h.events(), vec![Event::Failed(ClientError::TlsNotOffered)]);
        assert!(h.s.is_dead());
        // Nothing more goes out: not USER, not PASS in cleartext.
        assert!(h.sent().is_empty());
    }
}

/// A server at its session cap answers every command 421: that is its own (transient) error, not "no TLS", so
/// the caller retries instead of logging in without TLS.
#[test]
fn a_busy_servers_421_is_an_error_not_a_missing_tls() {
    let mut h = greeted();
    h.start(Op::Secure {
        require: false,
        protect_data: true,
    });
    h.expect("AUTH TLS", "421 Too many sessions.\n");
    match h.events().as_slice() {
        [Event::Failed(e)] => assert_eq!(e.reply_code(), Some(421), "{e:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bytes_behind_the_234_fail_the_session() {
    let mut h = greeted();
    h.start(Op::Secure {
        require: false,
        protect_data: true,
    });
    h.expect("AUTH TLS", "234 AUTH TLS successful.\n230 Injected.\n");
    assert_eq!(h.events(), vec![Event::Failed(ClientError::TlsInjected)]);
    assert!(h.sent().is_empty());
}

/// AUTH TLS does not wait for the greeting: it leaves with the connection, and its reply comes behind the `220`
/// (one round trip less for every TLS-capable session). The greeting is still read first and still decides:
/// a `421` ends the session before anything else happens, and only AUTH goes early, never a login.
#[test]
fn auth_tls_leaves_before_the_greeting_and_its_reply_comes_behind_it() {
    let mut h = Scripted::new();
    h.start(Op::Secure {
        require: false,
        protect_data: true,
    });
    assert_eq!(h.sent(), ["AUTH TLS"], "sent before any greeting");
    // Both replies in one read (the server answers AUTH as soon as its greeting is out).
    h.reply("220 ready.\n504 Unknown security mechanism.\n");
    assert_eq!(h.events(), vec![Event::Done(Outcome::Secured(false))]);
    assert!(h.s.banner().is_some_and(|b| b.code == 220));
    // In two reads as well, with the reply deadline kept for the AUTH after the greeting.
    let mut h = Scripted::new();
    h.start(Op::Secure {
        require: true,
        protect_data: true,
    });
    assert_eq!(h.sent(), ["AUTH TLS"]);
    h.reply("220 ready.\n");
    assert!(h.events().is_empty());
    assert!(
        h.s.poll_timeout().is_some(),
        "the AUTH reply has a deadline"
    );
    h.reply("234 AUTH TLS successful.\n");
    assert_eq!(h.events(), vec![Event::StartTls]);
    // A busy server's greeting ends it: the AUTH's reply never counts.
    let mut h = Scripted::new();
    h.start(Op::Secure {
        require: true,
        protect_data: true,
    });
    assert_eq!(h.sent(), ["AUTH TLS"]);
    h.reply("421 Too many sessions.\n");
    assert!(matches!(&h.events()[..], [Event::Failed(_)]));
    assert!(h.s.is_dead());
    // Nothing but AUTH goes before the greeting.
    let mut h = Scripted::new();
    h.start(Op::Login {
        user: "anonymous".into(),
        pass: ANONYMOUS_PASSWORD.into(),
    });
    assert!(h.sent().is_empty(), "a login waits for the greeting");
    h.reply("220 ready.\n");
    assert_eq!(h.sent(), ["USER anonymous"]);
}
