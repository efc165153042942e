//! Where a client's login comes from, so a password need not be on the command line (where `ps` shows it to
//! every local user). The user: the URL, else the `~/.netrc` entry for the host, else `anonymous`. The password,
//! in order: the URL (still accepted, with a warning), `DRSFTP_PASSWORD`, the netrc entry, a no-echo prompt when
//! stdin is a terminal; anonymous logins keep the conventional `drsftp@`.
//!
//! netrc (`$NETRC`, else `~/.netrc`): whitespace-separated tokens, `machine NAME` or `default` followed by `login`,
//! `password` and `account` pairs; a token may be double-quoted with backslash escapes (GNU inetutils); `macdef`
//! bodies (up to a blank line) are skipped. The first `machine` entry for the host wins, then `default`.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{Context, Result};

use crate::url::FtpUrl;

/// The environment variable holding a password.
pub const PASSWORD_ENV: &str = "DRSFTP_PASSWORD";

/// A netrc entry's login and password.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetrcEntry {
    pub login: Option<String>,
    pub password: Option<String>,
}

/// Splits netrc text into tokens (quotes and escapes resolved, `macdef` bodies dropped).
fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&c) = chars.peek() else {
            return out;
        };
        let mut tok = String::new();
        if c == '"' {
            chars.next();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => tok.extend(chars.next()),
                    c => tok.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    tok.extend(chars.next());
                } else {
                    tok.push(c);
                }
            }
        }
        if tok == "macdef" && out.last().is_none_or(|t| t != "password" && t != "login") {
            // The macro's name, then its body up to an empty line.
            let rest: String = chars.by_ref().collect();
            let body_end = rest.find("\n\n").map_or(rest.len(), |i| i + 2);
            return {
                out.extend(tokens(&rest[body_end..]));
                out
            };
        }
        out.push(tok);
    }
}

/// The entry for `host` in netrc `text`: the first `machine host`, else `default`.
pub fn netrc_lookup(text: &str, host: &str) -> Option<NetrcEntry> {
    let toks = tokens(text);
    let mut found: Option<NetrcEntry> = None;
    let mut default: Option<NetrcEntry> = None;
    // Which entry the following login/password pairs belong to: 0 none, 1 the host's, 2 default, 3 another.
    let mut current = 0;
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i].as_str();
        let arg = toks.get(i + 1).cloned();
        match t {
            "machine" => {
                current = if arg.as_deref() == Some(host) && found.is_none() {
                    found = Some(NetrcEntry::default());
                    1
                } else {
                    3
                };
                i += 2;
            }
            "default" => {
                current = if default.is_none() {
                    default = Some(NetrcEntry::default());
                    2
                } else {
                    3
                };
                i += 1;
            }
            "login" | "password" | "account" => {
                let e = match current {
                    1 => found.as_mut(),
                    2 => default.as_mut(),
                    _ => None,
                };
                if let Some(e) = e {
                    match t {
                        "login" => e.login = arg,
                        "password" => e.password = arg,
                        _ => {}
                    }
                }
                i += 2;
            }
            _ => i += 1,
        }
    }
    found.or(default)
}

fn netrc_path() -> Option<PathBuf> {
    match std::env::var_os("NETRC") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".netrc")),
    }
}

fn netrc_for(host: &str) -> Result<Option<NetrcEntry>> {
    let Some(path) = netrc_path() else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    Ok(netrc_lookup(&text, host))
}

/// Completes `url`'s user and password from the sources above.
pub fn fill(url: &mut FtpUrl) -> Result<()> {
    if url.pass_given {
        eprintln!(
            "drsftp: warning: a password in the URL is visible in `ps` to every local user; use {PASSWORD_ENV}, \
             ~/.netrc or the prompt"
        );
        return Ok(());
    }
    let netrc = netrc_for(&url.host)?;
    if !url.user_given {
        if let Some(login) = netrc.as_ref().and_then(|e| e.login.clone()) {
            url.user = login;
        }
    }
    if url.user.eq_ignore_ascii_case("anonymous") || url.user.eq_ignore_ascii_case("ftp") {
        return Ok(());
    }
    if let Ok(p) = std::env::var(PASSWORD_ENV) {
        if !p.is_empty() {
            url.pass = p;
            return Ok(());
        }
    }
    let from_netrc = netrc
        .filter(|e| e.login.as_deref().is_none_or(|l| l == url.user))
        .and_then(|e| e.password);
    if let Some(p) = from_netrc {
        url.pass = p;
        return Ok(());
    }
    if std::io::stdin().is_terminal() {
        url.pass = rpassword::prompt_password(format!("Password for {}@{}: ", url.user, url.host))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_entries_default_and_quoting() {
        let text = "machine other login o password op\n\
                    machine h.example login alice password \"p w\\\"x\"\n\
                    default login anon password dp\n";
        let e = netrc_lookup(text, "h.example").unwrap();
        assert_eq!(e.login.as_deref(), Some("alice"));
        assert_eq!(e.password.as_deref(), Some("p w\"x"));
        let d = netrc_lookup(text, "nowhere").unwrap();
        assert_eq!(d.login.as_deref(), Some("anon"));
        assert_eq!(d.password.as_deref(), Some("dp"));
        assert_eq!(netrc_lookup("machine a login b", "c"), None);
    }

    #[test]
    fn first_match_wins_and_macdef_is_skipped() {
        let text = "macdef init\ncd /tmp\nmachine h password evil\n\n\
                    machine h login u password first\nmachine h login u password second\n";
        let e = netrc_lookup(text, "h").unwrap();
        assert_eq!(e.password.as_deref(), Some("first"));
        // Tokens split on any whitespace; an unterminated quote runs to the end.
        let e = netrc_lookup("machine\th\n\nlogin  u\tpassword \"a b", "h").unwrap();
        assert_eq!(e.password.as_deref(), Some("a b"));
        // A password that is the word `machine` when quoted stays a password.
        let e = netrc_lookup("machine h login u password \"machine\"", "h").unwrap();
        assert_eq!(e.password.as_deref(), Some("machine"));
    }
}
