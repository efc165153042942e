//! `Op::Secure` (explicit FTPS, RFC 4217) against a scripted server: the command order (FEAT, AUTH TLS, the
//! driver's handshake, PBSZ 0, PROT P, all before USER), `require` against a server without TLS, and bytes
//! behind the `234` refused.

use super::script_tests::{Scripted, DRSFTP_FEAT};
use super::*;

const TLS_FEAT: &str =
    "211-Extensions supported:\n AUTH TLS\n PBSZ\n PROT\n UTF8\n DRS\n211 End.\n";

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
    h.expect("FEAT", TLS_FEAT);
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
fn without_auth_tls_in_feat_auto_stays_clear_and_require_fails() {
    let mut h = greeted();
    h.start(Op::Secure {
        require: false,
        protect_data: true,
    });
    h.expect("FEAT", DRSFTP_FEAT);
    assert_eq!(h.events(), vec![Event::Done(Outcome::Secured(false))]);
    let mut h = greeted();
    h.start(Op::Secure {
        require: true,
        protect_data: true,
    });
    h.expect("FEAT", "500 Unknown command.\n");
    assert_eq!(h.events(), vec![Event::Failed(ClientError::TlsNotOffered)]);
    assert!(h.s.is_dead());
}

/// pyftpdlib lists each mechanism on its own line, `AUTH SSL` first: TLS is offered all the same.
#[test]
fn auth_tls_on_a_later_feat_line_is_offered() {
    let mut h = greeted();
    h.start(Op::Secure {
        require: true,
        protect_data: true,
    });
    h.expect(
        "FEAT",
        "211-Features supported:\n AUTH SSL\n AUTH TLS\n PBSZ\n PROT\n211 End FEAT.\n",
    );
    assert_eq!(h.sent(), ["AUTH TLS"]);
}

#[test]
fn bytes_behind_the_234_fail_the_session() {
    let mut h = greeted();
    h.start(Op::Secure {
        require: false,
        protect_data: true,
    });
    h.expect("FEAT", TLS_FEAT);
    h.expect("AUTH TLS", "234 AUTH TLS successful.\n230 Injected.\n");
    assert_eq!(h.events(), vec![Event::Failed(ClientError::TlsInjected)]);
    assert!(h.sent().is_empty());
}
