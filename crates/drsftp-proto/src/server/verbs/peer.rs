//! `PEER <ip>`: names the host the session's passive data connections will come from, for a third-party copy
//! whose sending server is not the client. Without it a PASV/EPSV/SPAS listener accepts a connection only from
//! the control connection's peer address (others are closed unread, and the listener keeps waiting), so nobody
//! who merely guesses the port can read a download or inject bytes into an upload (data-port hijacking). Naming
//! another host than the control peer is a foreign data address like a third-party `PORT`: allowed only where
//! the session's `ThirdParty` policy allows foreign data addresses (`504` otherwise); naming the control peer's
//! own address is always allowed. Under `--third-party all` passive connections are accepted from any host when
//! nothing was named (for third-party clients such as globus-url-copy, which do not send `PEER`).
//!
//! Syntax: `PEER <IPv4 or IPv6 literal>` → `200 Passive data connections accepted from <ip>.` The name holds for
//! the session's later transfers until the next `PEER`. FEAT announces ` PEER`; drsftp's third-party client
//! sends it to the receiving server before PASV only when FEAT lists it (client/third_party.rs).

use std::net::IpAddr;
use std::time::Instant;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};

pub(super) const PEER: Verb = Verb::cmd("PEER", peer).feat(155, &["PEER"]);

/// `PEER <ip>`.
fn peer(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let ip: IpAddr = super::required(arg, "PEER")?
        .trim()
        .parse()
        .map_err(|_| CommandError::syntax("PEER needs an IPv4 or IPv6 address."))?;
    let ip = ip.to_canonical();
    if ip.is_unspecified() || ip.is_multicast() {
        return Err(CommandError::syntax("PEER needs a host address."));
    }
    if ip != ctx.peer.ip().to_canonical() && !ctx.foreign_data_allowed() {
        return Err(CommandError::Unsupported(
            "Refusing data connections from a host other than the client.".into(),
        ));
    }
    ctx.data.data_peer = Some(ip);
    ctx.reply(
        200,
        &format!("Passive data connections accepted from {ip}."),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::H;
    use crate::server::{ServerConfig, ThirdParty};

    fn session(policy: ThirdParty, anonymous: bool) -> H {
        let mut h = H::with_users(
            ServerConfig {
                third_party: policy,
                ..ServerConfig::default()
            },
            &[("u", "p", false)],
        );
        if anonymous {
            h.login();
        } else {
            h.cmd("USER u");
            assert!(h.cmd("PASS p").starts_with("230 "));
        }
        h
    }

    #[test]
    fn the_plan_names_the_control_peer_by_default() {
        let mut h = session(ThirdParty::Auth, false);
        h.pasv();
        let plan = h.retr_file("/f", 1);
        assert_eq!(plan.data_peer, Some("127.0.0.1".parse().unwrap()));
        // Only `all` accepts any host when nothing was named.
        let mut h = session(ThirdParty::All, true);
        h.pasv();
        assert_eq!(h.retr_file("/f", 1).data_peer, None);
    }

    #[test]
    fn naming_a_foreign_peer_follows_the_third_party_policy() {
        for (policy, anonymous, want) in [
            (ThirdParty::None, false, "504 "),
            (ThirdParty::Auth, true, "504 "),
            (ThirdParty::Auth, false, "200 "),
            (ThirdParty::All, true, "200 "),
        ] {
            let mut h = session(policy, anonymous);
            let r = h.cmd("PEER 198.18.0.7");
            assert!(r.starts_with(want), "{policy} anonymous={anonymous}: {r}");
            h.pasv();
            let plan = h.retr_file("/f", 1);
            let named = if want == "200 " {
                "198.18.0.7"
            } else {
                "127.0.0.1"
            };
            assert_eq!(plan.data_peer, Some(named.parse().unwrap()), "{policy}");
        }
        // The control peer's own address is always fine.
        let mut h = session(ThirdParty::None, true);
        assert_eq!(
            h.cmd("PEER 127.0.0.1"),
            "200 Passive data connections accepted from 127.0.0.1.\r\n"
        );
        assert!(h.cmd("PEER").starts_with("501 "));
        assert!(h.cmd("PEER host.example").starts_with("501 "));
        assert!(h.cmd("PEER 0.0.0.0").starts_with("501 "));
        assert!(h.cmd("FEAT").contains("\r\n PEER\r\n"));
        // Before login: 530 like every data command.
        let mut h = H::new();
        assert!(h.cmd("PEER 127.0.0.1").starts_with("530 "));
    }
}
