//! `SSCN ON|OFF` (the FXP servers' Set Secured Client Negotiation): with `ON` this server is the TLS *client* on
//! its `PROT P` data connections, for a server-to-server copy where the other end is the TLS server. A drsftp
//! extension pins that peer: `SSCN ON <sha256>` (64 hex digits, colons allowed) names the certificate the user's
//! client saw on its own control connection to the other server, so the data connection is checked without any
//! CA (docs: ARCHITECTURE.md, "The trust boundary"). Without a pin the peer must chain to the system roots.

use std::time::Instant;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::TlsPolicy;

// Listed right after the RFC 4217 lines (AUTH TLS, PBSZ, PROT at 5), before UTF8 (10).
pub(super) const SSCN: Verb = Verb::cmd("SSCN", sscn).feat_from(6, feat_lines);

/// Listed only with a certificate, as AUTH TLS is.
fn feat_lines(ctx: &Ctx) -> Vec<String> {
    match ctx.cfg.tls {
        TlsPolicy::Off => vec![],
        TlsPolicy::Offered | TlsPolicy::Required => vec!["SSCN".into()],
    }
}

/// A SHA-256 digest in hex, colons allowed (as `openssl x509 -fingerprint -sha256` prints it).
fn parse_pin(s: &str) -> Option<[u8; 32]> {
    let hex: Vec<u8> = s.bytes().filter(|c| *c != b':').collect();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        let pair = std::str::from_utf8(&hex[2 * i..2 * i + 2]).ok()?;
        *b = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(out)
}

fn sscn(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    if !ctx.sec.tls {
        return Err(CommandError::Sequence("SSCN needs AUTH TLS first.".into()));
    }
    let mut words = arg.split_whitespace();
    let (on, pin) = match (
        words.next().map(str::to_ascii_uppercase).as_deref(),
        words.next(),
        words.next(),
    ) {
        (None, _, _) => (ctx.sec.sscn, ctx.sec.sscn_pin),
        (Some("ON"), pin, None) => match pin.map(parse_pin) {
            None => (true, None),
            Some(Some(p)) => (true, Some(p)),
            Some(None) => {
                return Err(CommandError::syntax(
                    "SSCN ON takes an optional SHA-256 fingerprint (64 hex digits).",
                ))
            }
        },
        (Some("OFF"), None, None) => (false, None),
        _ => return Err(CommandError::syntax("SSCN takes ON [fingerprint] or OFF.")),
    };
    ctx.sec.sscn = on;
    ctx.sec.sscn_pin = pin;
    ctx.reply(
        200,
        if on {
            "SSCN:CLIENT METHOD"
        } else {
            "SSCN:SERVER METHOD"
        },
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::H;
    use crate::server::{ServerConfig, TlsPolicy};

    fn tls() -> H {
        let mut h = H::with_cfg(ServerConfig {
            tls: TlsPolicy::Offered,
            ..ServerConfig::default()
        });
        assert!(h.cmd("AUTH TLS").starts_with("234 "));
        h.actions();
        h.login();
        assert!(h.cmd("PBSZ 0").starts_with("200 "));
        assert!(h.cmd("PROT P").starts_with("200 "));
        h
    }

    #[test]
    fn feat_lists_sscn_only_with_a_certificate() {
        assert!(!H::new().cmd("FEAT").contains("SSCN"));
        assert!(tls().cmd("FEAT").contains("\r\n SSCN\r\n"));
    }

    #[test]
    fn sscn_needs_tls_and_checks_its_pin() {
        let mut h = H::new();
        h.login();
        assert!(h.cmd("SSCN ON").starts_with("503 "));
        let mut h = tls();
        assert_eq!(h.cmd("SSCN"), "200 SSCN:SERVER METHOD\r\n");
        assert!(h.cmd("SSCN ON abcd").starts_with("501 "));
        assert!(h.cmd("SSCN ON zz").starts_with("501 "));
        assert!(h.cmd("SSCN MAYBE").starts_with("501 "));
        // A refused pin changed nothing.
        assert_eq!(h.cmd("SSCN"), "200 SSCN:SERVER METHOD\r\n");
    }

    /// The transfer plan carries the role and the pin; `SSCN OFF` puts both back.
    #[test]
    fn sscn_on_makes_the_server_the_tls_client_of_its_data_connections() {
        let mut h = tls();
        let pin = "00:11".to_string() + &":22".repeat(30);
        assert_eq!(
            h.cmd(&format!("SSCN ON {pin}")),
            "200 SSCN:CLIENT METHOD\r\n"
        );
        h.pasv();
        let plan = h.retr_file("/f", 10);
        assert!(plan.protect && plan.tls_client);
        let mut want = [0x22u8; 32];
        (want[0], want[1]) = (0x00, 0x11);
        assert_eq!(plan.tls_peer_pin, Some(want));
        h.done_ok(plan.id);
        assert_eq!(h.cmd("SSCN OFF"), "200 SSCN:SERVER METHOD\r\n");
        h.pasv();
        let plan = h.retr_file("/f", 10);
        assert!(plan.protect && !plan.tls_client && plan.tls_peer_pin.is_none());
    }
}
