//! Explicit FTPS (RFC 4217): `AUTH TLS`, `PBSZ` and `PROT`, announced in FEAT only when the server has a
//! certificate ([`TlsPolicy`] is not `Off`). `AUTH TLS` only marks the upgrade: the session (`session.rs`) checks
//! that no cleartext byte followed the line, replies `234` and emits [`Action::StartTls`](crate::server::Action)
//! for the driver, which owns the handshake. `PROT P` makes the next data connections TLS ([`Ctx::sec`]).

use std::time::Instant;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::TlsPolicy;

pub(super) const AUTH: Verb = Verb::cmd("AUTH", auth)
    .before_login()
    .feat_from(5, feat_lines);
pub(super) const PBSZ: Verb = Verb::cmd("PBSZ", pbsz).before_login();
pub(super) const PROT: Verb = Verb::cmd("PROT", prot).before_login();

/// FEAT lines: none without a certificate, so FEAT stays byte-identical for servers without TLS.
fn feat_lines(ctx: &Ctx) -> Vec<String> {
    match ctx.cfg.tls {
        TlsPolicy::Off => vec![],
        TlsPolicy::Offered | TlsPolicy::Required => {
            vec!["AUTH TLS".into(), "PBSZ".into(), "PROT".into()]
        }
    }
}

/// `AUTH TLS` (or `TLS-C`, the same thing in RFC 4217's draft names).
fn auth(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    if ctx.cfg.tls == TlsPolicy::Off {
        return Err(CommandError::Reply(
            502,
            "AUTH is not available: no certificate is configured.".into(),
        ));
    }
    if ctx.sec.tls {
        return Err(CommandError::Sequence("Already using TLS.".into()));
    }
    match arg.trim().to_ascii_uppercase().as_str() {
        "TLS" | "TLS-C" => {
            // The reply and the upgrade come from the session once it knows nothing was pipelined behind us.
            ctx.sec.tls = true;
            ctx.sec.upgrade_requested = true;
            Ok(())
        }
        _ => Err(CommandError::Unsupported(
            "AUTH mechanism not supported (use AUTH TLS).".into(),
        )),
    }
}

/// `PBSZ n`: only 0 makes sense for TLS (RFC 4217 §8); any number is answered with `PBSZ=0`.
fn pbsz(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    if !ctx.sec.tls {
        return Err(CommandError::Sequence("PBSZ needs AUTH TLS first.".into()));
    }
    if arg.trim().parse::<u64>().is_err() {
        return Err(CommandError::syntax("PBSZ takes a number (0)."));
    }
    ctx.sec.pbsz = true;
    ctx.reply(200, "PBSZ=0");
    Ok(())
}

/// `PROT C|P` (RFC 4217 §9; `S` and `E` are not offered by TLS).
fn prot(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    if !ctx.sec.tls {
        return Err(CommandError::Sequence("PROT needs AUTH TLS first.".into()));
    }
    if !ctx.sec.pbsz {
        return Err(CommandError::Sequence("PROT needs PBSZ first.".into()));
    }
    match arg.trim().to_ascii_uppercase().as_str() {
        "C" if ctx.cfg.tls == TlsPolicy::Required => Err(CommandError::Reply(
            536,
            "PROT C refused: this server requires protected data channels.".into(),
        )),
        "C" => {
            ctx.sec.protect_data = false;
            ctx.reply(200, "Protection level set to Clear.");
            Ok(())
        }
        "P" => {
            ctx.sec.protect_data = true;
            ctx.reply(200, "Protection level set to Private.");
            Ok(())
        }
        "S" | "E" => Err(CommandError::Reply(
            536,
            "Only PROT C and PROT P are supported.".into(),
        )),
        _ => Err(CommandError::syntax("PROT takes C or P.")),
    }
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::H;
    use crate::server::{Action, ServerConfig, TlsPolicy};

    fn tls(policy: TlsPolicy) -> H {
        H::with_cfg(ServerConfig {
            tls: policy,
            ..ServerConfig::default()
        })
    }

    #[test]
    fn feat_lists_auth_tls_only_with_a_certificate() {
        let plain = H::new().cmd("FEAT");
        assert!(!plain.contains("AUTH"), "{plain}");
        let with = tls(TlsPolicy::Offered).cmd("FEAT");
        // The same reply with the three lines first and SSCN (verbs/sscn.rs) after them: nothing else moves.
        assert_eq!(
            with,
            plain.replacen(
                "\r\n UTF8\r\n",
                "\r\n AUTH TLS\r\n PBSZ\r\n PROT\r\n SSCN\r\n UTF8\r\n",
                1
            )
        );
    }

    #[test]
    fn auth_pbsz_prot_state_machine() {
        let mut h = H::new();
        assert!(h.cmd("AUTH TLS").starts_with("502 "));
        let mut h = tls(TlsPolicy::Offered);
        assert_eq!(h.cmd("PBSZ 0"), "503 PBSZ needs AUTH TLS first.\r\n");
        assert_eq!(h.cmd("PROT P"), "503 PROT needs AUTH TLS first.\r\n");
        assert!(h.cmd("AUTH KERBEROS").starts_with("504 "));
        assert!(h.actions().is_empty());
        assert_eq!(h.cmd("auth tls"), "234 AUTH TLS successful.\r\n");
        assert_eq!(h.actions(), vec![Action::StartTls]);
        assert_eq!(h.cmd("AUTH TLS"), "503 Already using TLS.\r\n");
        assert_eq!(h.cmd("PROT P"), "503 PROT needs PBSZ first.\r\n");
        assert!(h.cmd("PBSZ x").starts_with("501 "));
        assert_eq!(h.cmd("PBSZ 16384"), "200 PBSZ=0\r\n");
        assert_eq!(
            h.cmd("PROT S"),
            "536 Only PROT C and PROT P are supported.\r\n"
        );
        assert!(h.cmd("PROT Z").starts_with("501 "));
        assert_eq!(h.cmd("PROT C"), "200 Protection level set to Clear.\r\n");
        assert_eq!(h.cmd("PROT P"), "200 Protection level set to Private.\r\n");
        h.login();
        h.pasv();
        // Every transfer carries the protection: stream mode, and MODE E downloads and uploads (the driver then
        // runs TLS on each of its parallel connections).
        let plan = h.retr_file("/f", 10);
        assert!(plan.protect);
        assert_eq!(plan.mode, crate::server::Mode::Stream);
        h.done_ok(plan.id);
        assert!(h.cmd("MODE E").starts_with("200 "));
        h.pasv();
        let plan = h.retr_file("/f", 10);
        assert!(plan.protect, "MODE E RETR under PROT P");
        assert_eq!(plan.mode, crate::server::Mode::Extended);
        h.done_ok(plan.id);
        // (STOR in MODE E takes the same path: `start_transfer` is where PROT P used to be refused.)
        // PROT C again: the next MODE E transfer is cleartext.
        assert!(h.cmd("PROT C").starts_with("200 "));
        h.pasv();
        assert!(!h.retr_file("/f", 10).protect);
    }

    #[test]
    fn cleartext_after_auth_is_dropped_with_the_connection() {
        // A whole pipelined command, and a partial one: both close without running anything.
        for tail in ["USER bob\r\n", "US"] {
            let mut h = tls(TlsPolicy::Offered);
            h.send_raw(format!("AUTH TLS\r\n{tail}").as_bytes());
            let out = h.out();
            assert!(!out.contains("234"), "{out}");
            assert!(!out.contains("331"), "{out}");
            assert!(out.starts_with("421 "), "{out}");
            assert_eq!(h.actions(), vec![Action::Close]);
            assert!(h.s.is_closed());
        }
    }

    #[test]
    fn tls_required_refuses_cleartext_login_and_data() {
        let mut h = tls(TlsPolicy::Required);
        assert_eq!(
            h.cmd("USER bob"),
            "530 TLS required: send AUTH TLS first.\r\n"
        );
        assert_eq!(
            h.cmd("PASS pw"),
            "530 TLS required: send AUTH TLS first.\r\n"
        );
        assert_eq!(h.cmd("AUTH TLS"), "234 AUTH TLS successful.\r\n");
        assert_eq!(h.actions(), vec![Action::StartTls]);
        h.login();
        h.cmd("PBSZ 0");
        assert!(h.cmd("PROT C").starts_with("536 "));
        // Still PROT C (the default): no data channel.
        h.cmd("TYPE I");
        h.pasv();
        h.send("RETR /f");
        let mut r = h.out();
        if r.is_empty() {
            r = h.fs(
                crate::server::FsRequest::Stat("/f".into()),
                crate::server::FsResult::Stat(crate::server::testutil::file("f", 10)),
            );
        }
        assert!(r.starts_with("521 "), "{r}");
    }
}
