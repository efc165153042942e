//! USER and PASS: anonymous (`anonymous`/`ftp`, any password, when enabled; read-only unless `anonymous_write`)
//! and user logins, whose credentials the driver checks ([`Action::CheckLogin`], answered by
//! `handle_login`): the session never sees a password hash and never blocks on hashing. Every USER gets `331` so
//! user names cannot be probed. A failed PASS is answered only after a growing delay (a timer, so the session
//! stays sans-IO), and after `max_login_failures` the connection is closed with `421`.
//!
//! [`Action::CheckLogin`]: crate::server::Action::CheckLogin

use std::time::{Duration, Instant};

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::{AuditEvent, LoginVerdict};

pub(super) const USER: Verb = Verb::cmd("USER", user).before_login();
pub(super) const PASS: Verb = Verb::cmd("PASS", pass).before_login();

fn is_anonymous(name: &str) -> bool {
    name.eq_ignore_ascii_case("anonymous") || name.eq_ignore_ascii_case("ftp")
}

/// The name as shown in replies and the audit log: at most 64 characters.
fn shown(name: &str) -> String {
    name.chars().take(64).collect()
}

/// `USER name`: starts a (new) login.
fn user(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let name = arg.trim();
    if name.is_empty() {
        return Err(CommandError::syntax("USER needs a user name."));
    }
    ctx.login.logged_in = None;
    ctx.login.anonymous = false;
    ctx.login.read_only = false;
    ctx.login.user = Some(name.to_string());
    if ctx.cfg.anonymous && is_anonymous(name) {
        ctx.reply(331, "Guest login ok, send your e-mail address as password.");
    } else {
        ctx.reply(331, &format!("Password required for {}.", shown(name)));
    }
    Ok(())
}

/// `PASS secret`: completes the login started by USER (anonymous here, any other user by the driver).
fn pass(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let Some(name) = ctx.login.user.take() else {
        return Err(CommandError::Sequence(if ctx.login.logged_in.is_some() {
            "Already logged in.".into()
        } else {
            "Login with USER first.".into()
        }));
    };
    if ctx.cfg.anonymous && is_anonymous(&name) {
        let read_only = !ctx.cfg.anonymous_write;
        logged_in(ctx, name, true, read_only);
        return Ok(());
    }
    ctx.check_login(
        name.clone(),
        arg.to_string(),
        move |ctx, now, verdict| match verdict {
            LoginVerdict::Granted { read_only } => logged_in(ctx, name, false, read_only),
            LoginVerdict::Denied => failed(ctx, now, name),
            LoginVerdict::Blocked => {
                audit(ctx, &name, false, false, false);
                ctx.close(
                    421,
                    "Too many failed logins from your address; try again later.",
                );
            }
        },
    );
    Ok(())
}

fn audit(ctx: &mut Ctx, name: &str, anonymous: bool, ok: bool, read_only: bool) {
    ctx.event(AuditEvent::Login {
        user: shown(name),
        anonymous,
        ok,
        read_only,
    });
}

fn logged_in(ctx: &mut Ctx, name: String, anonymous: bool, read_only: bool) {
    audit(ctx, &name, anonymous, true, read_only);
    ctx.reply(230, &format!("User {} logged in.", shown(&name)));
    ctx.login.failures = 0;
    ctx.limits.login_deadline = None;
    ctx.cwd = "/".into();
    ctx.login.logged_in = Some(name);
    ctx.login.anonymous = anonymous;
    ctx.login.read_only = read_only;
}

/// The delay before the `530` of the `n`-th failed PASS (1-based) on this connection.
pub(crate) fn failure_delay(delays: &[Duration], n: u32) -> Duration {
    let i = (n.max(1) - 1) as usize;
    delays
        .get(i)
        .or(delays.last())
        .copied()
        .unwrap_or(Duration::ZERO)
}

/// A refused PASS: `530` after the delay (commands wait meanwhile), and `421` + close after the last allowed one.
fn failed(ctx: &mut Ctx, now: Instant, name: String) {
    audit(ctx, &name, false, false, false);
    ctx.login.failures += 1;
    let n = ctx.login.failures;
    let answer = move |ctx: &mut Ctx, _now: Instant| {
        ctx.reply(530, "Login incorrect.");
        if n >= ctx.cfg.max_login_failures {
            ctx.close(421, "Too many failed logins; closing control connection.");
        }
    };
    let wait = failure_delay(&ctx.cfg.login_delays, n);
    match now.checked_add(wait).filter(|_| !wait.is_zero()) {
        Some(until) => ctx.delay(until, answer),
        None => answer(ctx, now),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::server::testutil::H;
    use crate::server::{Action, AuditEvent, LoginVerdict, ServerConfig};

    fn users_only() -> ServerConfig {
        ServerConfig {
            anonymous: false,
            ..ServerConfig::default()
        }
    }

    #[test]
    fn anonymous_login_and_commands_before_it() {
        let mut h = H::new();
        assert_eq!(h.cmd("PWD"), "530 Please login with USER and PASS.\r\n");
        assert_eq!(h.cmd("PASS x"), "503 Login with USER first.\r\n");
        assert!(h.cmd("USER anonymous").starts_with("331 "));
        assert_eq!(h.cmd("PASS globus@"), "230 User anonymous logged in.\r\n");
        assert_eq!(h.cmd("PWD"), "257 \"/\" is the current directory.\r\n");
        assert_eq!(h.cmd("PASS again"), "503 Already logged in.\r\n");
        assert_eq!(
            h.s.poll_event(),
            Some(AuditEvent::Login {
                user: "anonymous".into(),
                anonymous: true,
                ok: true,
                read_only: false
            })
        );
    }

    /// The password goes to the driver as an action (never compared here); commands wait for the verdict.
    #[test]
    fn user_login_is_checked_by_the_driver() {
        let mut h = H::with_cfg(users_only());
        h.cmd("USER alice");
        assert_eq!(h.cmd("PASS s3cret\r\nPWD"), "");
        match h.s.poll_action() {
            Some(Action::CheckLogin { user, password }) => {
                assert_eq!(user, "alice");
                assert_eq!(password.0, "s3cret");
                assert_eq!(format!("{password:?}"), "<redacted>");
            }
            other => panic!("{other:?}"),
        }
        h.s.handle_login(h.now, LoginVerdict::Granted { read_only: true });
        assert_eq!(
            h.out(),
            "230 User alice logged in.\r\n257 \"/\" is the current directory.\r\n"
        );
        assert_eq!(
            h.cmd("DELE /f"),
            "550 Permission denied: read-only session.\r\n"
        );
    }

    /// A failed PASS is answered after 0.5 s, 1 s, 2 s (virtual clock); the third closes with 421.
    #[test]
    fn failures_are_answered_after_growing_delays_then_closed() {
        let mut h = H::with_users(users_only(), &[("alice", "s3cret", false)]);
        let t0 = h.now;
        let mut waits = vec![];
        for i in 0..3 {
            h.cmd("USER alice");
            let t = h.now;
            assert_eq!(h.cmd("PASS wrong"), "", "no reply before the delay");
            // Commands sent meanwhile wait too.
            assert_eq!(h.cmd("NOOP"), "");
            h.now += Duration::from_millis(10);
            h.s.handle_timeout(h.now);
            assert_eq!(h.out(), "", "still waiting");
            let r = h.fire();
            waits.push(h.now - t);
            if i < 2 {
                assert_eq!(
                    r,
                    "530 Login incorrect.\r\n200 NOOP command successful.\r\n"
                );
            } else {
                assert_eq!(
                    r,
                    "530 Login incorrect.\r\n421 Too many failed logins; closing control connection.\r\n"
                );
            }
        }
        assert_eq!(waits, [500, 1000, 2000].map(Duration::from_millis).to_vec());
        assert!(h.s.is_closed());
        // 3 guesses took 3.5 s: well under one guess per second after the first.
        assert!(h.now - t0 >= Duration::from_millis(3500));
        let fails = std::iter::from_fn(|| h.s.poll_event())
            .filter(|e| matches!(e, AuditEvent::Login { ok: false, .. }))
            .count();
        assert_eq!(fails, 3);
    }

    #[test]
    fn delays_grow_to_the_cap() {
        let d = crate::server::DEFAULT_LOGIN_DELAYS;
        let f = |n| super::failure_delay(&d, n);
        assert_eq!(f(1), Duration::from_millis(500));
        assert_eq!(f(4), Duration::from_secs(4));
        assert_eq!(f(5), Duration::from_secs(5));
        assert_eq!(f(50), Duration::from_secs(5));
        assert_eq!(super::failure_delay(&[], 3), Duration::ZERO);
    }

    #[test]
    fn refused_user_then_good_user() {
        let mut h = H::with_users(users_only(), &[("alice", "s3cret", false)]);
        assert_eq!(
            h.cmd("USER anonymous"),
            "331 Password required for anonymous.\r\n"
        );
        h.cmd("PASS globus@");
        assert_eq!(h.fire(), "530 Login incorrect.\r\n");
        assert_eq!(h.cmd("NOOP"), "200 NOOP command successful.\r\n");
        h.cmd("USER alice");
        assert_eq!(h.cmd("PASS s3cret"), "230 User alice logged in.\r\n");
        assert!(!h.s.is_closed());
        assert_eq!(
            h.cmd("MKD /d"),
            "",
            "read-write user: the Mkdir request goes out"
        );
    }

    /// The driver's per-address block: `421` and close at once, whatever the password.
    #[test]
    fn blocked_address_is_closed() {
        let mut h = H::with_cfg(users_only());
        h.cmd("USER alice");
        h.cmd("PASS s3cret");
        assert!(h.s.take_check_login().is_some());
        h.s.handle_login(h.now, LoginVerdict::Blocked);
        assert_eq!(
            h.out(),
            "421 Too many failed logins from your address; try again later.\r\n"
        );
        assert!(h.s.is_closed());
    }

    /// A connection that does not log in within `login_timeout` is closed, whatever it sends.
    #[test]
    fn pre_login_timeout_closes() {
        let mut h = H::with_cfg(ServerConfig {
            login_timeout: Duration::from_secs(30),
            ..ServerConfig::default()
        });
        assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_secs(30)));
        h.advance(Duration::from_secs(20));
        assert_eq!(h.cmd("NOOP"), "200 NOOP command successful.\r\n");
        assert_eq!(
            h.fire(),
            "421 Login timeout (30 seconds): closing control connection.\r\n"
        );
        assert!(h.s.is_closed());
        // Logged in: only the idle timer remains.
        let mut h = H::new();
        h.login();
        assert_eq!(h.s.poll_timeout(), Some(h.now + Duration::from_secs(900)));
    }

    /// Anonymous sessions are read-only by default: every verb row marked `writes` is refused by the dispatcher
    /// before its handler runs (no Fs request, no transfer).
    #[test]
    fn anonymous_is_read_only_by_default() {
        let mut h = H::with_cfg(ServerConfig::default());
        h.login();
        h.pasv();
        for c in [
            "STOR /x",
            "APPE /x",
            "ESTO A 0 /x",
            "DELE /f",
            "RNFR /f",
            "RNTO /g",
            "MKD /d",
            "XMKD /d",
            "RMD /d",
            "XRMD /d",
        ] {
            assert_eq!(
                h.cmd(c),
                "550 Permission denied: read-only session.\r\n",
                "{c}"
            );
        }
        assert_eq!(h.actions(), vec![]);
        // Reads still work.
        h.send("SIZE /f");
        assert!(matches!(h.s.poll_action(), Some(Action::Fs(_))));
        // With anonymous_write the same verbs reach the driver.
        let mut h = H::new();
        h.login();
        h.cmd("DELE /f");
        assert!(matches!(h.s.poll_action(), Some(Action::Fs(_))));
    }
}
