//! PASV, EPSV and SPAS: the server listens, the client (or the third-party sender) connects. Each asks the
//! driver for listeners on the data interface (or the control connection's local address) and advertises the
//! port(s): `227 Entering Passive Mode (h1,h2,h3,h4,p1,p2)`, `229 Entering Extended Passive Mode (|||port|)`,
//! and for SPAS the multi-line `229-Entering Striped Passive Mode.` / ` h1,...,p2` / `229 End` (one stripe, or
//! on a striped frontend one per data mover: `ServerConfig::data_nodes`, whose listeners are on the movers and
//! are advertised with the movers' addresses; EPSV there is refused, since it names a port on this host only).
//! PASV and SPAS need IPv4 (host-port syntax); `EPSV ALL` locks the session to EPSV (RFC 2428 §4).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use super::Verb;
use crate::hostport::host_port;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::DataEndpoint;

pub(super) const PASV: Verb = Verb::cmd("PASV", pasv);
pub(super) const EPSV: Verb = Verb::cmd("EPSV", epsv).feat(140, &["EPSV"]);
pub(super) const SPAS: Verb = Verb::cmd("SPAS", spas).feat(90, &["SPAS"]);
/// ` STRIPES n` (a drsftp line, last in FEAT): how many stripes SPAS would answer with. GFD.20's FEAT cannot say
/// "one stripe", so without it a client asks SPAS before every MODE E download, and that reply decides how many
/// listeners it opens: a round trip before it can send PORT. Told 1, our client skips SPAS and sends its whole
/// download set-up, PORT and RETR in one write.
pub(super) const STRIPES: Verb = Verb::feature("STRIPES").feat_from(170, |ctx| {
    vec![format!("STRIPES {}", ctx.cfg.data_nodes.max(1))]
});

/// The ports of the driver's listeners, or why there are none.
fn ports(r: Result<Vec<SocketAddr>, String>) -> Result<Vec<u16>, String> {
    Ok(listeners(r)?.iter().map(SocketAddr::port).collect())
}

/// The driver's listeners, or why there are none.
fn listeners(r: Result<Vec<SocketAddr>, String>) -> Result<Vec<SocketAddr>, String> {
    let addrs = r?;
    if addrs.is_empty() || addrs.iter().any(|a| a.port() == 0) {
        return Err("no listening port".into());
    }
    Ok(addrs)
}

/// The `h1,...,p2` of each listener: on this host, the advertised address and the port; on a striped
/// frontend, the mover's own IPv4 address.
fn shown(
    ctx: &Ctx,
    ip: Ipv4Addr,
    r: Result<Vec<SocketAddr>, String>,
) -> Result<Vec<String>, String> {
    let remote = ctx.cfg.data_nodes > 0;
    listeners(r)?
        .iter()
        .map(|a| match (remote, a.ip()) {
            (false, _) => Ok(host_port(ip, a.port())),
            (true, IpAddr::V4(v4)) => Ok(host_port(v4, a.port())),
            (true, IpAddr::V6(_)) => Err("a data mover listens on IPv6".to_string()),
        })
        .collect()
}

fn refused(ctx: &mut Ctx, why: &str) {
    ctx.reply(425, &format!("Cannot open passive data connection: {why}"));
}

fn check_not_epsv_all(ctx: &Ctx) -> CmdResult {
    if ctx.data.epsv_all {
        Err(CommandError::Sequence(
            "EPSV ALL in effect: only EPSV may set up data connections.".into(),
        ))
    } else {
        Ok(())
    }
}

/// Bind address and advertised IPv4 address for PASV/SPAS.
fn ipv4(ctx: &Ctx, verb: &str) -> Result<(IpAddr, Ipv4Addr), CommandError> {
    match (ctx.data_ip(), ctx.advertised_ip()) {
        (bind @ IpAddr::V4(_), IpAddr::V4(shown)) => Ok((bind, shown)),
        _ => Err(CommandError::NoData(format!(
            "{verb} needs IPv4; use EPSV."
        ))),
    }
}

/// `PASV`.
fn pasv(ctx: &mut Ctx, _now: Instant, _arg: &str) -> CmdResult {
    check_not_epsv_all(ctx)?;
    let (bind, ip) = ipv4(ctx, "PASV")?;
    ctx.listen(bind, 1, move |ctx, _now, r| match shown(ctx, ip, r) {
        Ok(p) => {
            ctx.data.endpoint = Some(DataEndpoint::Passive);
            ctx.reply(227, &format!("Entering Passive Mode ({})", p[0]));
        }
        Err(e) => refused(ctx, &e),
    });
    Ok(())
}

/// `EPSV [1|2|ALL]`.
fn epsv(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let ip = ctx.data_ip();
    let shown = ctx.advertised_ip();
    let arg = arg.trim();
    if ctx.cfg.data_nodes > 0 {
        return Err(CommandError::Reply(
            522,
            "Striped frontend: data goes to its movers; use PASV or SPAS.".into(),
        ));
    }
    if arg.eq_ignore_ascii_case("ALL") {
        ctx.data.epsv_all = true;
        ctx.reply(200, "EPSV ALL command successful.");
        return Ok(());
    }
    let family_ok = match arg {
        "" => true,
        "1" => ip.is_ipv4() && shown.is_ipv4(),
        "2" => ip.is_ipv6() && shown.is_ipv6(),
        a if super::parse_u64(a).is_some() => false,
        _ => return Err(CommandError::syntax("Syntax error in EPSV argument.")),
    };
    if !family_ok {
        let ours = if shown.is_ipv4() { 1 } else { 2 };
        return Err(CommandError::Reply(
            522,
            format!("Network protocol not supported, use ({ours})"),
        ));
    }
    ctx.listen(ip, 1, move |ctx, _now, r| match ports(r) {
        Ok(p) => {
            ctx.data.endpoint = Some(DataEndpoint::Passive);
            ctx.reply(
                229,
                &format!("Entering Extended Passive Mode (|||{}|)", p[0]),
            );
        }
        Err(e) => refused(ctx, &e),
    });
    Ok(())
}

/// `SPAS`: striped passive, one stripe here.
fn spas(ctx: &mut Ctx, _now: Instant, _arg: &str) -> CmdResult {
    check_not_epsv_all(ctx)?;
    let (bind, ip) = ipv4(ctx, "SPAS")?;
    let stripes = ctx.cfg.data_nodes.max(1);
    ctx.listen(bind, stripes, move |ctx, _now, r| match shown(ctx, ip, r) {
        Ok(p) => {
            ctx.data.endpoint = Some(DataEndpoint::Passive);
            let body: Vec<String> = p.iter().map(|hp| format!(" {hp}")).collect();
            ctx.reply_multi(229, "Entering Striped Passive Mode.", &body, "End");
        }
        Err(e) => refused(ctx, &e),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::H;
    use crate::server::{Action, DataEndpoint, ServerConfig};
    use std::net::IpAddr;

    #[test]
    fn pasv_epsv_spas_replies() {
        let mut h = H::new();
        h.login();
        h.send("PASV");
        assert_eq!(
            h.actions(),
            vec![Action::Listen {
                ip: "127.0.0.1".parse().unwrap(),
                count: 1
            }]
        );
        h.s.handle_listening(h.now, Ok(vec!["127.0.0.1:37465".parse().unwrap()]));
        assert_eq!(h.out(), "227 Entering Passive Mode (127,0,0,1,146,89)\r\n");
        h.send("EPSV");
        h.actions();
        h.s.handle_listening(h.now, Ok(vec!["127.0.0.1:50001".parse().unwrap()]));
        assert_eq!(
            h.out(),
            "229 Entering Extended Passive Mode (|||50001|)\r\n"
        );
        h.send("SPAS");
        h.actions();
        h.s.handle_listening(h.now, Ok(vec!["127.0.0.1:45571".parse().unwrap()]));
        assert_eq!(
            h.out(),
            "229-Entering Striped Passive Mode.\r\n 127,0,0,1,178,3\r\n229 End\r\n"
        );
        assert!(h.cmd("EPSV 2").starts_with("522 "));
        assert!(h.cmd("EPSV x").starts_with("501 "));
        assert_eq!(h.retr_file("/f", 1).endpoint, DataEndpoint::Passive);
    }

    #[test]
    fn listen_failure_is_425_and_forgets_the_endpoint() {
        let mut h = H::new();
        h.login();
        h.pasv();
        h.send("PASV");
        h.actions();
        h.s.handle_listening(h.now, Err("address in use".into()));
        assert_eq!(
            h.out(),
            "425 Cannot open passive data connection: address in use\r\n"
        );
        assert!(h.cmd("RETR /f").starts_with("425 "));
        h.send("EPSV");
        h.actions();
        h.s.handle_listening(h.now, Ok(vec![]));
        assert!(h.out().starts_with("425 "));
        // Commands sent while the driver binds wait for its answer.
        h.send("PASV\r\nNOOP");
        assert_eq!(h.out(), "");
        h.actions();
        h.s.handle_listening(h.now, Ok(vec!["127.0.0.1:1025".parse().unwrap()]));
        assert_eq!(
            h.out(),
            "227 Entering Passive Mode (127,0,0,1,4,1)\r\n200 NOOP command successful.\r\n"
        );
    }

    #[test]
    fn data_interface_and_ipv6() {
        let mut h = H::with_cfg(ServerConfig {
            data_interface: Some("198.18.0.1".parse().unwrap()),
            ..ServerConfig::default()
        });
        h.login();
        h.send("PASV");
        assert_eq!(
            h.actions(),
            vec![Action::Listen {
                ip: "198.18.0.1".parse().unwrap(),
                count: 1
            }]
        );
        // A wildcard data interface binds everywhere and advertises the control connection's address.
        let mut h = H::with_cfg(ServerConfig {
            data_interface: Some("0.0.0.0".parse().unwrap()),
            ..ServerConfig::default()
        });
        h.login();
        h.send("PASV");
        let ip = "0.0.0.0".parse().unwrap();
        assert_eq!(h.actions(), vec![Action::Listen { ip, count: 1 }]);
        h.s.handle_listening(h.now, Ok(vec!["0.0.0.0:40000".parse().unwrap()]));
        assert_eq!(h.out(), "227 Entering Passive Mode (127,0,0,1,156,64)\r\n");
        let mut h = H::with_addrs("[::1]:2811", "[::1]:40000");
        h.login();
        assert!(h.cmd("PASV").starts_with("425 "));
        assert!(h.cmd("SPAS").starts_with("425 "));
        h.send("EPSV 2");
        let ip: IpAddr = "::1".parse().unwrap();
        assert_eq!(h.actions(), vec![Action::Listen { ip, count: 1 }]);
        h.s.handle_listening(h.now, Ok(vec!["[::1]:6000".parse().unwrap()]));
        assert_eq!(h.out(), "229 Entering Extended Passive Mode (|||6000|)\r\n");
        assert_eq!(h.cmd("EPSV ALL"), "200 EPSV ALL command successful.\r\n");
        assert!(h.cmd("PORT 127,0,0,1,4,1").starts_with("503 "));
        assert!(h.cmd("PASV").starts_with("503 "));
    }

    #[test]
    fn a_striped_frontend_shows_its_movers() {
        let mut h = H::with_cfg(ServerConfig {
            data_nodes: 2,
            ..ServerConfig::default()
        });
        h.login();
        h.send("SPAS");
        let ip = "127.0.0.1".parse().unwrap();
        assert_eq!(h.actions(), vec![Action::Listen { ip, count: 2 }]);
        let movers = vec![
            "127.0.0.2:45571".parse().unwrap(),
            "127.0.0.3:45572".parse().unwrap(),
        ];
        h.s.handle_listening(h.now, Ok(movers));
        assert_eq!(
            h.out(),
            "229-Entering Striped Passive Mode.\r\n 127,0,0,2,178,3\r\n 127,0,0,3,178,4\r\n229 End\r\n"
        );
        h.send("PASV");
        assert_eq!(h.actions(), vec![Action::Listen { ip, count: 1 }]);
        h.s.handle_listening(h.now, Ok(vec!["127.0.0.2:1025".parse().unwrap()]));
        assert_eq!(h.out(), "227 Entering Passive Mode (127,0,0,2,4,1)\r\n");
        assert!(h.cmd("EPSV").starts_with("522 "));
    }
}
