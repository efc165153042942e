//! SITE subcommands, as Globus names them: the TCP-buffer family (`RETRBUFSIZE`, `STORBUFSIZE`, `SBUF`,
//! `RBUFSZ`, `RBUFSIZ`, `SBUFSZ`, `SBUFSIZ`; `BUFSIZE` is refused with `500` like Globus), `CLIENTINFO` (sent by
//! globus-url-copy, acknowledged), `PARTIAL` (resumable uploads, verbs/partial.rs) and `HELP`.

use std::time::Instant;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};

pub(super) const SITE: Verb = Verb::cmd("SITE", site);

const BUFFER_COMMANDS: [&str; 9] = [
    "RETRBUFSIZE",
    "STORBUFSIZE",
    "SBUF",
    "RBUFSZ",
    "RBUFSIZ",
    "RBUFSIZE",
    "SBUFSZ",
    "SBUFSIZ",
    "SBUFSIZE",
];

/// `SITE <subcommand> [args]`.
fn site(ctx: &mut Ctx, now: Instant, arg: &str) -> CmdResult {
    let arg = arg.trim_start();
    let (sub, rest) = arg.split_once(' ').unwrap_or((arg, ""));
    let sub = sub.to_ascii_uppercase();
    if BUFFER_COMMANDS.contains(&sub.as_str()) {
        super::sbuf::set_buffer(ctx, rest)?;
        ctx.reply(200, "Site Command Successful.");
        return Ok(());
    }
    match sub.as_str() {
        "HELP" => {
            let mut all: Vec<&str> = BUFFER_COMMANDS.to_vec();
            all.extend(["CLIENTINFO", "HELP", "PARTIAL"]);
            let body: Vec<String> = all.chunks(8).map(|c| format!(" {}", c.join(" "))).collect();
            ctx.reply_multi(
                214,
                "The following SITE commands are recognized:",
                &body,
                "End.",
            );
            Ok(())
        }
        "PARTIAL" => super::partial::site_partial(ctx, now, rest),
        "CLIENTINFO" => {
            ctx.reply(250, "OK.");
            Ok(())
        }
        "" => Err(CommandError::syntax("SITE needs a subcommand.")),
        _ => Err(CommandError::Reply(500, "Invalid command.".into())),
    }
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::H;

    #[test]
    fn site_buffer_commands() {
        let mut h = H::new();
        h.login();
        assert_eq!(
            h.cmd("SITE RETRBUFSIZE 4194304"),
            "200 Site Command Successful.\r\n"
        );
        assert_eq!(
            h.cmd("site storbufsize 1048576"),
            "200 Site Command Successful.\r\n"
        );
        assert!(h.cmd("SITE STORBUFSIZE 4M").starts_with("501 "));
        assert_eq!(h.cmd("SITE BUFSIZE 4096"), "500 Invalid command.\r\n");
        assert_eq!(
            h.cmd("SITE CLIENTINFO scheme=ftp;appname=\"globus-url-copy\";"),
            "250 OK.\r\n"
        );
        assert!(h.cmd("SITE HELP").starts_with("214-"));
        assert!(h.cmd("SITE").starts_with("501 "));
        h.pasv();
        assert_eq!(h.retr_file("/f", 1).tcp_buffer, Some(1048576));
    }
}
