//! Transfer endpoints on the command line: `ftp://[user[:pass]@]host[:port]/path` URLs (RFC 1738 with
//! percent-decoding, `[v6]` hosts) and local paths (plain or `file://`). Resolution of host names happens in the
//! driver, not here.

use anyhow::{anyhow, bail, Result};
use std::fmt;
use std::path::PathBuf;

/// Default control port for `ftp://` URLs (as globus-url-copy uses for `ftp://`).
pub const DEFAULT_PORT: u16 = 21;

/// A remote endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FtpUrl {
    /// User name (default `anonymous`).
    pub user: String,
    /// Password (default `drsftp@`).
    pub pass: String,
    /// Host name or IP literal (without brackets).
    pub host: String,
    /// Control port.
    pub port: u16,
    /// Server path, percent-decoded, starting with '/' unless empty. Sent to the server as is.
    pub path: String,
    /// The URL named a user (else `user` is the default and `credentials::fill` may take one from netrc).
    pub user_given: bool,
    /// The URL carried a password (visible in `ps`: `credentials::fill` warns).
    pub pass_given: bool,
}

impl FtpUrl {
    /// `host:port` suitable for `ToSocketAddrs` (brackets around IPv6 literals).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The last path component, if any (used when the other side names a directory).
    pub fn file_name(&self) -> Option<&str> {
        self.path.rsplit('/').next().filter(|s| !s.is_empty())
    }

    /// True if the path ends with '/', i.e. names a directory.
    pub fn is_dir_like(&self) -> bool {
        self.path.is_empty() || self.path.ends_with('/')
    }

    /// A copy with `name` appended to a directory path.
    pub fn join(&self, name: &str) -> FtpUrl {
        let mut u = self.clone();
        if !u.path.ends_with('/') {
            u.path.push('/');
        }
        u.path.push_str(name);
        u
    }
}

impl fmt::Display for FtpUrl {
    /// Prints the URL without the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ftp://{}{}", self.authority(), self.path)
    }
}

/// A `copy` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A local file or directory.
    Local(PathBuf),
    /// A file or directory on a GridFTP/FTP server.
    Remote(FtpUrl),
}

fn percent_decode(s: &str) -> Result<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .ok_or_else(|| anyhow!("bad percent escape in {s:?}"))?;
            let v = u8::from_str_radix(hex, 16)
                .map_err(|_| anyhow!("bad percent escape %{hex} in {s:?}"))?;
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| anyhow!("percent escapes in {s:?} are not UTF-8"))
}

/// Parses an `ftp://` URL. Other schemes are rejected with a hint.
pub fn parse_url(s: &str) -> Result<FtpUrl> {
    let Some((scheme, rest)) = s.split_once("://") else {
        bail!("not a URL: {s:?}")
    };
    match scheme.to_ascii_lowercase().as_str() {
        "ftp" => {}
        "gsiftp" | "sshftp" | "ftps" => bail!(
            "{scheme}:// needs GSI/TLS/SSH security, which drsftp does not implement; use ftp://"
        ),
        other => {
            bail!("unsupported URL scheme {other}:// (use ftp://host:port/path or a local path)")
        }
    }
    let (auth, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if path.contains(['\r', '\n']) || auth.contains(['\r', '\n']) {
        bail!("URL contains a line break");
    }
    let (userinfo, hostport) = match auth.rfind('@') {
        Some(i) => (Some(&auth[..i]), &auth[i + 1..]),
        None => (None, auth),
    };
    let (user, pass, user_given, pass_given) = match userinfo {
        None => (
            "anonymous".to_string(),
            drsftp_proto::client::ANONYMOUS_PASSWORD.to_string(),
            false,
            false,
        ),
        Some(ui) => match ui.split_once(':') {
            Some((u, p)) => (percent_decode(u)?, percent_decode(p)?, true, true),
            None => (
                percent_decode(ui)?,
                drsftp_proto::client::ANONYMOUS_PASSWORD.to_string(),
                true,
                false,
            ),
        },
    };
    let (host, port) = if let Some(h) = hostport.strip_prefix('[') {
        let end = h
            .find(']')
            .ok_or_else(|| anyhow!("unclosed '[' in {s:?}"))?;
        let host = &h[..end];
        let port = match &h[end + 1..] {
            "" => DEFAULT_PORT,
            p => p
                .strip_prefix(':')
                .ok_or_else(|| anyhow!("junk after ']' in {s:?}"))?
                .parse()?,
        };
        (host.to_string(), port)
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (
                h.to_string(),
                p.parse().map_err(|_| anyhow!("bad port {p:?} in {s:?}"))?,
            ),
            None => (hostport.to_string(), DEFAULT_PORT),
        }
    };
    if host.is_empty() {
        bail!("no host in {s:?}");
    }
    if port == 0 {
        bail!("port 0 in {s:?}");
    }
    let path = percent_decode(path)?;
    if path.contains(['\r', '\n', '\0']) {
        bail!("path contains a control character");
    }
    Ok(FtpUrl {
        user_given,
        pass_given,
        user,
        pass,
        host,
        port,
        path,
    })
}

/// Parses a `copy` argument: `ftp://...` is remote, `file://...` and anything else local.
pub fn parse_endpoint(s: &str) -> Result<Endpoint> {
    if let Some(p) = s.strip_prefix("file://") {
        // file:///abs/path or file://localhost/abs/path
        let p = p.strip_prefix("localhost").unwrap_or(p);
        return Ok(Endpoint::Local(PathBuf::from(percent_decode(p)?)));
    }
    if s.contains("://") {
        return Ok(Endpoint::Remote(parse_url(s)?));
    }
    Ok(Endpoint::Local(PathBuf::from(s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_url() {
        let u = parse_url("ftp://alice:p%40ss@127.0.0.1:2811/tmp/gftp/src/f200M").unwrap();
        assert_eq!(u.user, "alice");
        assert_eq!(u.pass, "p@ss");
        assert_eq!(u.authority(), "127.0.0.1:2811");
        assert_eq!(u.path, "/tmp/gftp/src/f200M");
        assert_eq!(u.file_name(), Some("f200M"));
        assert_eq!(u.to_string(), "ftp://127.0.0.1:2811/tmp/gftp/src/f200M");
    }

    #[test]
    fn defaults_v6_and_escapes() {
        let u = parse_url("ftp://[::1]/%2Ftmp/a%20b/").unwrap();
        assert_eq!((u.user.as_str(), u.pass.as_str()), ("anonymous", "drsftp@"));
        assert_eq!(u.authority(), "[::1]:21");
        assert_eq!(u.path, "//tmp/a b/");
        assert!(u.is_dir_like());
        assert_eq!(u.join("f").path, "//tmp/a b/f");
        let u = parse_url("ftp://h:2811").unwrap();
        assert_eq!(u.path, "");
        assert!(u.is_dir_like());
        assert_eq!(parse_url("ftp://bob@h/x").unwrap().user, "bob");
    }

    #[test]
    fn rejects_bad_urls() {
        for bad in [
            "ftp://:21/x",
            "ftp://h:0/x",
            "ftp://h:99999/x",
            "ftp://h:x/x",
            "ftp://[::1/x",
            "ftp://h/a%0d%0aDELE%20x",
            "ftp://h/%zz",
            "gsiftp://h/x",
            "http://h/x",
            "nonsense",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn endpoints() {
        assert_eq!(
            parse_endpoint("/tmp/x").unwrap(),
            Endpoint::Local("/tmp/x".into())
        );
        assert_eq!(
            parse_endpoint("file:///tmp/x").unwrap(),
            Endpoint::Local("/tmp/x".into())
        );
        assert_eq!(
            parse_endpoint("file://localhost/tmp/x").unwrap(),
            Endpoint::Local("/tmp/x".into())
        );
        assert!(matches!(
            parse_endpoint("ftp://h/x").unwrap(),
            Endpoint::Remote(_)
        ));
    }
}
