//! PORT, EPRT and SPOR: the server connects to the client (or to a third-party receiver). Arguments are parsed
//! strictly. Bounce protection (RFC 2577): the target must be the control peer's address (any loopback address
//! counts as the same when the peer is loopback) unless foreign data addresses are allowed (the configured
//! [`ThirdParty`](crate::server::ThirdParty) policy for this login, or the driver's override), and never a port
//! below 1024; otherwise `504`. Replies follow Globus: `200 PORT Command successful.`

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Instant;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::DataEndpoint;

pub(super) const PORT: Verb = Verb::cmd("PORT", port);
pub(super) const EPRT: Verb = Verb::cmd("EPRT", eprt).feat(150, &["EPRT"]);
pub(super) const SPOR: Verb = Verb::cmd("SPOR", spor).feat(100, &["SPOR"]);

/// Most addresses accepted in one SPOR.
const MAX_STRIPES: usize = 16;

/// Parses `h1,h2,h3,h4,p1,p2` (each a decimal 0..=255).
pub(crate) fn parse_host_port(s: &str) -> Option<SocketAddr> {
    let mut n = [0u8; 6];
    let mut parts = s.trim().split(',');
    for slot in &mut n {
        let p = parts.next()?.trim();
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *slot = p.parse().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    let ip = Ipv4Addr::new(n[0], n[1], n[2], n[3]);
    Some(SocketAddr::new(
        IpAddr::V4(ip),
        u16::from(n[4]) << 8 | u16::from(n[5]),
    ))
}

/// Parses `EPRT <d><proto><d><addr><d><port><d>` (RFC 2428). `Err(522)` for an unknown protocol number.
pub(crate) fn parse_eprt(s: &str) -> Result<SocketAddr, CommandError> {
    let bad = || CommandError::syntax("Syntax error in EPRT argument.");
    let s = s.trim();
    let d = s.chars().next().ok_or_else(bad)?;
    if !(d.is_ascii_graphic()) || d.is_ascii_alphanumeric() || d == '.' || d == ':' {
        return Err(bad());
    }
    let fields: Vec<&str> = s.split(d).collect();
    let [empty, proto, addr, port, end] = fields.as_slice() else {
        return Err(bad());
    };
    if !empty.is_empty() || !end.is_empty() {
        return Err(bad());
    }
    let port = super::parse_u64(port)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or_else(bad)?;
    let ip = match *proto {
        "1" => IpAddr::V4(addr.parse::<Ipv4Addr>().map_err(|_| bad())?),
        "2" => IpAddr::V6(addr.parse::<Ipv6Addr>().map_err(|_| bad())?),
        p if super::parse_u64(p).is_some() => {
            return Err(CommandError::Reply(
                522,
                "Network protocol not supported, use (1,2)".into(),
            ))
        }
        _ => return Err(bad()),
    };
    Ok(SocketAddr::new(ip, port))
}

/// Bounce protection for one target.
pub(crate) fn check_target(ctx: &Ctx, a: SocketAddr) -> CmdResult {
    if a.port() < 1024 {
        return Err(CommandError::Unsupported(
            "Refusing a data connection to a port below 1024.".into(),
        ));
    }
    let ip = a.ip().to_canonical();
    let peer = ctx.peer.ip().to_canonical();
    let same = ip == peer || (ip.is_loopback() && peer.is_loopback());
    if !same && !ctx.foreign_data_allowed() {
        return Err(CommandError::Unsupported(
            "Refusing a data connection to a host other than the client.".into(),
        ));
    }
    Ok(())
}

fn set_active(ctx: &mut Ctx, addrs: Vec<SocketAddr>, text: &str) -> CmdResult {
    if ctx.data.epsv_all {
        return Err(CommandError::Sequence(
            "EPSV ALL in effect: only EPSV may set up data connections.".into(),
        ));
    }
    for a in &addrs {
        check_target(ctx, *a)?;
    }
    ctx.data.endpoint = Some(DataEndpoint::Active(addrs));
    ctx.reply(200, text);
    Ok(())
}

/// `PORT h1,h2,h3,h4,p1,p2`.
fn port(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let a = parse_host_port(arg)
        .ok_or_else(|| CommandError::syntax("Syntax error in PORT argument."))?;
    set_active(ctx, vec![a], "PORT Command successful.")
}

/// `EPRT |1|a.b.c.d|port|` or `EPRT |2|v6addr|port|`.
fn eprt(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let a = parse_eprt(arg)?;
    set_active(ctx, vec![a], "EPRT Command successful.")
}

/// `SPOR hp1 hp2 ...`: one address per receiving stripe.
fn spor(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let bad = || CommandError::syntax("Syntax error in SPOR arguments.");
    let addrs: Vec<SocketAddr> = arg
        .split_whitespace()
        .map(|w| parse_host_port(w).ok_or_else(bad))
        .collect::<Result<_, _>>()?;
    if addrs.is_empty() || addrs.len() > MAX_STRIPES {
        return Err(bad());
    }
    set_active(ctx, addrs, "PORT Command successful.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::testutil::H;

    #[test]
    fn host_port_parsing_is_strict() {
        assert_eq!(
            parse_host_port("127,0,0,1,235,41"),
            Some("127.0.0.1:60201".parse().unwrap())
        );
        for bad in [
            "127,0,0,1,235",
            "127,0,0,1,235,41,1",
            "127,0,0,256,1,1",
            "127,0,0,1,+1,1",
            "1,2,3,4,5,",
            "",
            "a,b,c,d,e,f",
            "0001,0,0,1,1,1",
        ] {
            assert_eq!(parse_host_port(bad), None, "{bad}");
        }
        assert_eq!(
            parse_eprt("|1|132.235.1.2|6275|"),
            Ok("132.235.1.2:6275".parse().unwrap())
        );
        assert_eq!(
            parse_eprt("!2!::1!5282!"),
            Ok("[::1]:5282".parse().unwrap())
        );
        assert_eq!(parse_eprt("|3|1.2.3.4|5|").unwrap_err().code(), 522);
        for bad in [
            "",
            "|1|1.2.3.4|5",
            "|1|1.2.3.4|0|",
            "|1|::1|5000|",
            "|2|1.2.3.4|5000|",
            "|1|1.2.3.4|70000|",
            "x1x1.2.3.4x5x",
            "|1|1.2.3.4|5||",
        ] {
            assert_eq!(parse_eprt(bad).map_err(|e| e.code()), Err(501), "{bad}");
        }
    }

    #[test]
    fn bad_port_arguments_and_bounce_protection() {
        let mut h = H::new(); // peer 127.0.0.1
        h.login();
        assert!(h.cmd("PORT 127,0,0,1").starts_with("501 "));
        assert!(h.cmd("PORT 127,0,0,1,0,21").starts_with("504 "), "port 21");
        assert!(
            h.cmd("PORT 10,0,0,1,235,41").starts_with("504 "),
            "foreign host"
        );
        assert!(h.cmd("EPRT |1|10.0.0.1|60000|").starts_with("504 "));
        assert!(h.cmd("SPOR 127,0,0,1,4,1 10,0,0,1,4,1").starts_with("504 "));
        assert!(h.cmd("SPOR").starts_with("501 "));
        // No endpoint was set by any of them; the session still works.
        assert!(h.cmd("RETR /f").starts_with("425 "));
        assert_eq!(
            h.cmd("PORT 127,0,0,1,235,41"),
            "200 PORT Command successful.\r\n"
        );
        assert_eq!(
            h.cmd("EPRT |2|::1|60000|"),
            "200 EPRT Command successful.\r\n"
        );
        h.s.set_allow_foreign_data(true);
        assert_eq!(
            h.cmd("SPOR 127,0,0,1,178,3 10,0,0,2,135,213"),
            "200 PORT Command successful.\r\n"
        );
        assert_eq!(
            h.retr_file("/f", 1).endpoint,
            DataEndpoint::Active(vec![
                "127.0.0.1:45571".parse().unwrap(),
                "10.0.0.2:34773".parse().unwrap()
            ])
        );
        let mut h = H::with_addrs("[::ffff:192.0.2.1]:2811", "[::ffff:192.0.2.7]:5000");
        h.login();
        assert_eq!(
            h.cmd("PORT 192,0,2,7,4,1"),
            "200 PORT Command successful.\r\n",
            "v4-mapped peer"
        );
    }

    /// `ServerConfig::third_party`: `none` refuses foreign data addresses for everyone, `auth` (the default)
    /// allows them for configured users only, `all` for anonymous sessions too. Same for EPRT, BPAS and BPRT.
    #[test]
    fn third_party_policy_decides_foreign_data_addresses_per_login() {
        use crate::server::{ServerConfig, ThirdParty};
        assert_eq!(ServerConfig::default().third_party, ThirdParty::Auth);
        let session = |policy: ThirdParty, anonymous: bool| {
            let mut h = H::with_users(
                ServerConfig {
                    third_party: policy,
                    ..ServerConfig::default()
                },
                &[("alice", "s3cret", false)],
            );
            if anonymous {
                h.login();
            } else {
                assert!(h.cmd("USER alice").starts_with("331 "));
                assert_eq!(h.cmd("PASS s3cret"), "230 User alice logged in.\r\n");
            }
            h
        };
        let foreign = "PORT 10,0,0,1,235,41";
        for (policy, anonymous, want) in [
            (ThirdParty::None, true, "504 "),
            (ThirdParty::None, false, "504 "),
            (ThirdParty::Auth, true, "504 "),
            (ThirdParty::Auth, false, "200 "),
            (ThirdParty::All, true, "200 "),
            (ThirdParty::All, false, "200 "),
        ] {
            let mut h = session(policy, anonymous);
            let r = h.cmd(foreign);
            assert!(r.starts_with(want), "{policy} anonymous={anonymous}: {r}");
            let r = h.cmd("EPRT |1|10.0.0.1|60000|");
            assert!(r.starts_with(want), "{policy} anonymous={anonymous}: {r}");
            // An allowed BPRT address is refused later, only because no BPAS channel exists (503).
            let r = h.cmd("BPRT 10,0,0,1,156,64 Id=0000000000000001");
            let bprt_want = if want == "504 " { "504 " } else { "503 " };
            assert!(
                r.starts_with(bprt_want),
                "{policy} anonymous={anonymous}: {r}"
            );
            // Below 1024 stays refused, and the control peer's own host is always fine.
            assert!(h.cmd("PORT 10,0,0,1,0,21").starts_with("504 "));
            assert!(h.cmd("PORT 127,0,0,1,235,41").starts_with("200 "));
        }
        // A new USER ends the real user's privileges until the next login; an anonymous re-login under `auth`
        // does not inherit them.
        let mut h = session(ThirdParty::Auth, false);
        h.login();
        assert!(h.cmd(foreign).starts_with("504 "));
        // The driver's override still allows it for anyone.
        let mut h = session(ThirdParty::None, true);
        h.s.set_allow_foreign_data(true);
        assert!(h.cmd(foreign).starts_with("200 "));
    }
}
