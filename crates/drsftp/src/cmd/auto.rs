//! `-p auto` for `drsftp copy`: the clap plumbing (`-p N|auto`, when auto applies) and the call into the library's
//! start choice, `drsftp_io::client::Client::choose_start` (measurements there, the decision in
//! `drsftp_tune::auto_start`).

use std::path::Path;

use anyhow::{Context, Result};
use drsftp_io::client::profile::ProfileStore;
use drsftp_io::client::{AutoChoice, Client, ClientOptions};

use crate::url::FtpUrl;

/// Chooses the start for `url`'s server and sets `opts.streams`. `profile_dir`: where paths.json lives (default:
/// XDG config).
pub async fn choose(
    client: &mut Client,
    url: &FtpUrl,
    opts: &mut ClientOptions,
    profile_dir: Option<&Path>,
) -> Result<AutoChoice> {
    let store = ProfileStore::open(profile_dir);
    let choice = client
        .choose_start(&url.authority(), store.as_ref(), opts.buffer)
        .await
        .context("-p auto: choosing the start")?;
    opts.streams = choice.start.streams;
    Ok(choice)
}

/// `-p N|auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parallel {
    Auto,
    Fixed(u32),
}

/// clap parser for `-p`: `auto` or 1..=128.
pub fn parallel_arg(s: &str) -> Result<Parallel, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(Parallel::Auto);
    }
    match s.parse::<u32>() {
        Ok(n @ 1..=128) => Ok(Parallel::Fixed(n)),
        _ => Err(format!("{s:?}: expected a stream count 1-128 or `auto`")),
    }
}

/// Whether `-p auto` runs: asked for, or by default when the user gave none of -p, --tcp-bs and --buffer (a
/// user-chosen buffer keeps the old default of one stream). Never over the UDP blast channel.
pub fn wants_auto(p: Option<Parallel>, tcp_bs: bool, buffer: bool, udp: bool) -> bool {
    !udp && match p {
        Some(Parallel::Auto) => true,
        Some(Parallel::Fixed(_)) => false,
        None => !tcp_bs && !buffer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_flag_and_default() {
        assert_eq!(parallel_arg("auto"), Ok(Parallel::Auto));
        assert_eq!(parallel_arg("4"), Ok(Parallel::Fixed(4)));
        assert!(
            parallel_arg("0").is_err()
                && parallel_arg("129").is_err()
                && parallel_arg("x").is_err()
        );
        assert!(wants_auto(None, false, false, false), "default");
        assert!(!wants_auto(None, true, false, false), "--tcp-bs keeps -p 1");
        assert!(!wants_auto(None, false, true, false), "--buffer keeps -p 1");
        assert!(
            wants_auto(Some(Parallel::Auto), true, true, false),
            "explicit auto"
        );
        assert!(!wants_auto(Some(Parallel::Fixed(1)), false, false, false));
        assert!(
            !wants_auto(Some(Parallel::Auto), false, false, true),
            "not over UDP"
        );
    }
}
