//! USER and PASS: anonymous (`anonymous`/`ftp`, any password, when enabled) and static user/password logins.
//! Every USER gets `331` so user names cannot be probed; after three failed PASS the connection is closed.

use std::time::Instant;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};

pub(super) const USER: Verb = Verb::cmd("USER", user).before_login();
pub(super) const PASS: Verb = Verb::cmd("PASS", pass).before_login();

/// Failed PASS attempts before `421` and close.
const MAX_LOGIN_FAILURES: u32 = 3;

fn is_anonymous(name: &str) -> bool {
    name.eq_ignore_ascii_case("anonymous") || name.eq_ignore_ascii_case("ftp")
}

/// Compares without an early exit on the first differing byte.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `USER name`: starts a (new) login.
fn user(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let name = arg.trim();
    if name.is_empty() {
        return Err(CommandError::syntax("USER needs a user name."));
    }
    let shown: String = name.chars().take(64).collect();
    ctx.login.logged_in = None;
    ctx.login.anonymous = false;
    ctx.login.user = Some(name.to_string());
    if ctx.cfg.anonymous && is_anonymous(name) {
        ctx.reply(331, "Guest login ok, send your e-mail address as password.");
    } else {
        ctx.reply(331, &format!("Password required for {shown}."));
    }
    Ok(())
}

/// `PASS secret`: completes the login started by USER.
fn pass(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let Some(name) = ctx.login.user.take() else {
        return Err(CommandError::Sequence(if ctx.login.logged_in.is_some() {
            "Already logged in.".into()
        } else {
            "Login with USER first.".into()
        }));
    };
    let anonymous = ctx.cfg.anonymous && is_anonymous(&name);
    let ok = anonymous
        || ctx
            .cfg
            .users
            .iter()
            .any(|(u, p)| *u == name && same_secret(p.as_bytes(), arg.as_bytes()));
    if ok {
        let shown: String = name.chars().take(64).collect();
        ctx.login.failures = 0;
        ctx.cwd = "/".into();
        ctx.login.logged_in = Some(name);
        ctx.login.anonymous = anonymous;
        ctx.reply(230, &format!("User {shown} logged in."));
    } else {
        ctx.login.failures += 1;
        ctx.reply(530, "Login incorrect.");
        if ctx.login.failures >= MAX_LOGIN_FAILURES {
            ctx.close(421, "Too many failed logins; closing control connection.");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::H;
    use crate::server::ServerConfig;

    #[test]
    fn anonymous_login_and_commands_before_it() {
        let mut h = H::new();
        assert_eq!(h.cmd("PWD"), "530 Please login with USER and PASS.\r\n");
        assert_eq!(h.cmd("PASS x"), "503 Login with USER first.\r\n");
        assert!(h.cmd("USER anonymous").starts_with("331 "));
        assert_eq!(h.cmd("PASS globus@"), "230 User anonymous logged in.\r\n");
        assert_eq!(h.cmd("PWD"), "257 \"/\" is the current directory.\r\n");
        assert_eq!(h.cmd("PASS again"), "503 Already logged in.\r\n");
    }

    #[test]
    fn refused_user_then_static_user() {
        let mut h = H::with_cfg(ServerConfig {
            anonymous: false,
            users: vec![("alice".into(), "s3cret".into())],
            ..ServerConfig::default()
        });
        assert_eq!(
            h.cmd("USER anonymous"),
            "331 Password required for anonymous.\r\n"
        );
        assert_eq!(h.cmd("PASS globus@"), "530 Login incorrect.\r\n");
        assert_eq!(h.cmd("NOOP"), "200 NOOP command successful.\r\n");
        h.cmd("USER alice");
        assert_eq!(h.cmd("PASS wrong"), "530 Login incorrect.\r\n");
        h.cmd("USER alice");
        assert_eq!(h.cmd("PASS s3cret"), "230 User alice logged in.\r\n");
        assert!(!h.s.is_closed());
    }

    #[test]
    fn three_failures_close_the_connection() {
        let mut h = H::with_cfg(ServerConfig {
            anonymous: false,
            ..ServerConfig::default()
        });
        for _ in 0..2 {
            h.cmd("USER bob");
            assert_eq!(h.cmd("PASS x"), "530 Login incorrect.\r\n");
        }
        h.cmd("USER bob");
        assert_eq!(
            h.cmd("PASS x"),
            "530 Login incorrect.\r\n421 Too many failed logins; closing control connection.\r\n"
        );
        assert!(h.s.is_closed());
        assert_eq!(h.actions(), vec![crate::server::Action::Close]);
        assert_eq!(h.cmd("NOOP"), "");
    }
}
