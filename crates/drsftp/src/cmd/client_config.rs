//! The client's own settings file, `$XDG_CONFIG_HOME/drsftp/config.toml` (default `~/.config/drsftp/config.toml`,
//! or `DRSFTP_CONFIG`): defaults for `drsftp copy` under `[copy]` (keys are its long flags, values as on the
//! command line, which wins) and host aliases under `[hosts.NAME]`, so `ftp://NAME/path` reaches
//! `ftp://[user@]host[:port]/path`. Passwords do not belong here (~/.netrc and DRSFTP_PASSWORD exist for them),
//! so an alias has no password key. Applied by parsing the file's values as command-line tokens with `copy`'s
//! own clap definition, like `serve --config`.
//!
//! ```toml
//! [copy]
//! parallel = "auto"
//! timeout = "2m"
//!
//! [hosts.archive]
//! host = "data.example.org:2811"
//! user = "alice"
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{anyhow, bail, Context, Result};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args as _, FromArgMatches};
use serde::Deserialize;

use super::copy::Args;
use super::serve_config::{cli_tokens, tokens};

/// One `[hosts.NAME]` entry.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HostAlias {
    /// `host[:port]` (IPv6 in brackets) the alias stands for.
    pub host: String,
    /// Login name used when the URL names none.
    #[serde(default)]
    pub user: Option<String>,
}

/// The file's contents.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// Defaults for `drsftp copy` (long flag → value).
    #[serde(default)]
    pub copy: toml::Table,
    /// Host aliases.
    #[serde(default)]
    pub hosts: BTreeMap<String, HostAlias>,
}

/// Where the file is: `DRSFTP_CONFIG`, else `$XDG_CONFIG_HOME/drsftp/config.toml`, else
/// `$HOME/.config/drsftp/config.toml`.
pub fn path() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = var("DRSFTP_CONFIG") {
        return Some(p);
    }
    let base = var("XDG_CONFIG_HOME").or_else(|| var("HOME").map(|h| h.join(".config")))?;
    Some(base.join("drsftp/config.toml"))
}

impl ClientConfig {
    /// Reads the file if it exists (a missing file is an empty configuration).
    pub fn load() -> Result<ClientConfig> {
        let Some(p) = path() else {
            return Ok(ClientConfig::default());
        };
        match std::fs::read_to_string(&p) {
            Ok(text) => toml::from_str(&text).with_context(|| format!("{}", p.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ClientConfig::default()),
            Err(e) => Err(e).with_context(|| format!("{}", p.display())),
        }
    }

    /// `url` with its host replaced when it names an alias: `ftp://[user@]NAME[/path]` (no port: an alias is a
    /// name, not a host that happens to share it). Other strings come back unchanged.
    pub fn expand(&self, url: &str) -> String {
        let Some((scheme, rest)) = url.split_once("://") else {
            return url.to_string();
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let (userinfo, name) = match authority.rsplit_once('@') {
            Some((u, n)) => (Some(u), n),
            None => (None, authority),
        };
        let Some(alias) = self.hosts.get(name) else {
            return url.to_string();
        };
        let user = userinfo.map(str::to_string).or_else(|| alias.user.clone());
        match user {
            Some(u) => format!("{scheme}://{u}@{}{path}", alias.host),
            None => format!("{scheme}://{}{path}", alias.host),
        }
    }
}

/// `drsftp copy`'s arguments with the file's `[copy]` defaults under the command line's flags and aliases
/// expanded in both ends. Without a file, `args` as they are.
pub fn apply(args: Args, cli: &ArgMatches) -> Result<Args> {
    let cfg = ClientConfig::load()?;
    if cfg.copy.is_empty() && cfg.hosts.is_empty() {
        return Ok(args);
    }
    let shown = path().map_or_else(String::new, |p| p.display().to_string());
    let cmd = Args::augment_args(clap::Command::new("drsftp copy").no_binary_name(true));
    let mut argv = vec![];
    for (key, v) in &cfg.copy {
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(key.as_str()) && key != "help")
            .ok_or_else(|| {
                anyhow!("{shown}: [copy]: unknown key {key:?} (keys are `drsftp copy` long flags)")
            })?;
        if cli.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine) {
            continue;
        }
        tokens(arg, key, v, &mut argv).with_context(|| format!("{shown}: [copy]"))?;
    }
    let mut positional = vec![];
    for arg in cmd.get_arguments() {
        match arg.get_long() {
            Some("help") => {}
            Some(long) => cli_tokens(arg, long, cli, &mut argv),
            None if arg.is_positional() => {
                for raw in cli.get_raw(arg.get_id().as_str()).into_iter().flatten() {
                    positional.push(cfg.expand(&raw.to_string_lossy()));
                }
            }
            None => {}
        }
    }
    if positional.len() != 2 {
        bail!("drsftp copy: expected a source and a destination");
    }
    argv.push("--".into());
    argv.extend(positional);
    let m = cmd
        .try_get_matches_from(&argv)
        .map_err(|e| anyhow!("{} (with {shown})", e.render().to_string().trim_end()))?;
    Args::from_arg_matches(&m).map_err(|e| anyhow!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_expand_names_only() {
        let cfg: ClientConfig = toml::from_str(
            "[copy]\nparallel = 4\n[hosts.archive]\nhost = \"[::1]:2811\"\nuser = \"alice\"\n\
             [hosts.plain]\nhost = \"data.example.org\"\n",
        )
        .unwrap();
        assert_eq!(
            cfg.expand("ftp://archive/a/b"),
            "ftp://alice@[::1]:2811/a/b"
        );
        assert_eq!(cfg.expand("ftp://bob@archive/x"), "ftp://bob@[::1]:2811/x");
        assert_eq!(cfg.expand("ftp://plain"), "ftp://data.example.org");
        assert_eq!(cfg.expand("ftp://archive:21/x"), "ftp://archive:21/x");
        assert_eq!(cfg.expand("./archive"), "./archive");
        let bad: Result<ClientConfig, _> =
            toml::from_str("[hosts.a]\nhost = \"h\"\npassword = \"x\"\n");
        assert!(bad.is_err(), "no passwords in aliases");
    }
}
