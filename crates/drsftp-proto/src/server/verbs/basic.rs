//! NOOP, SYST, HELP and QUIT: commands that only talk.

use std::time::Instant;

use super::{Busy, Verb};
use crate::server::ctx::Ctx;
use crate::server::error::CmdResult;

pub(super) const QUIT: Verb = Verb::cmd("QUIT", quit).before_login();
pub(super) const NOOP: Verb = Verb::cmd("NOOP", noop).before_login().busy(Busy::Inline);
pub(super) const SYST: Verb = Verb::cmd("SYST", syst).before_login();
pub(super) const HELP: Verb = Verb::cmd("HELP", help).before_login();

/// `NOOP`.
fn noop(ctx: &mut Ctx, _now: Instant, _arg: &str) -> CmdResult {
    ctx.reply(200, "NOOP command successful.");
    Ok(())
}

/// `SYST`.
fn syst(ctx: &mut Ctx, _now: Instant, _arg: &str) -> CmdResult {
    ctx.reply(215, "UNIX Type: L8");
    Ok(())
}

/// `HELP`: the registry's commands (not its feature-only rows), eight per line.
fn help(ctx: &mut Ctx, _now: Instant, _arg: &str) -> CmdResult {
    let names: Vec<&str> = super::VERBS
        .iter()
        .filter(|v| v.run.is_some())
        .map(|v| v.name)
        .collect();
    let body: Vec<String> = names
        .chunks(8)
        .map(|c| format!(" {}", c.join(" ")))
        .collect();
    ctx.reply_multi(214, "The following commands are recognized:", &body, "End.");
    Ok(())
}

/// `QUIT`: `221`, then close (after a running transfer: QUIT is deferred until it ends).
fn quit(ctx: &mut Ctx, _now: Instant, _arg: &str) -> CmdResult {
    ctx.close(221, "Goodbye.");
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::H;
    use crate::server::Action;

    #[test]
    fn syst_help_quit() {
        let mut h = H::new();
        assert_eq!(h.cmd("SYST"), "215 UNIX Type: L8\r\n");
        let help = h.cmd("HELP");
        // Pinned: the registry's command rows in table order (feature-only rows are not commands).
        assert_eq!(
            help,
            "214-The following commands are recognized:\r\n \
             USER PASS QUIT NOOP SYST HELP FEAT OPTS\r\n \
             STAT TYPE MODE STRU ALLO PWD XPWD CWD\r\n \
             XCWD CDUP XCUP MKD XMKD RMD XRMD DELE\r\n \
             RNFR RNTO SIZE MDTM MFMT MLST MLSD LIST\r\n \
             NLST PASV EPSV SPAS PORT EPRT SPOR BPAS\r\n \
             BPRT RETR ERET STOR APPE ESTO REST ABOR\r\n \
             SBUF SITE CKSM PEER AUTH PBSZ PROT SSCN\r\n214 End.\r\n"
        );
        assert_eq!(h.cmd("QUIT"), "221 Goodbye.\r\n");
        assert_eq!(h.actions(), vec![Action::Close]);
        assert!(h.s.is_closed());
        assert_eq!(h.s.poll_timeout(), None);
    }
}
