//! The verb registry: one row per FTP command naming its handler (in the file that owns the verb: parsing,
//! handling and tests together), whether it needs a logged-in user, and what happens to it while a transfer runs.
//! Adding a verb touches two files: its own, and this table.

use std::time::Instant;

use super::ctx::Ctx;
use super::error::CmdResult;

mod abor;
mod basic;
mod blast;
mod bprt;
mod cksm;
mod feat;
mod fsops;
mod info;
mod list;
mod login;
mod nav;
mod opts_retr;
mod params;
mod pasv;
mod port;
mod rest;
mod retr;
mod sbuf;
mod site;
mod stat;
mod stor;

/// Most packets in one blast transfer.
pub(crate) const MAX_BLAST_PACKETS: u64 = blast::MAX_PACKETS;

/// A verb handler: the argument is the text after the first space (empty if none).
pub(crate) type Handler = fn(&mut Ctx, Instant, &str) -> CmdResult;

/// What a command does while a transfer runs.
#[derive(Clone, Copy)]
pub(crate) enum Busy {
    /// Waits until the transfer has ended (in order with the other queued commands).
    Defer,
    /// Runs during the transfer when it is next in line.
    Inline,
    /// Runs at once, ahead of queued commands (ABOR).
    Jump,
    /// Jumps if the predicate holds for the argument, else waits (two-argument SBUF).
    JumpIf(fn(&str) -> bool),
}

/// One registry row.
pub(crate) struct Verb {
    pub(crate) name: &'static str,
    pub(crate) login: bool,
    pub(crate) busy: Busy,
    pub(crate) run: Handler,
}

const fn v(name: &'static str, login: bool, busy: Busy, run: Handler) -> Verb {
    Verb {
        name,
        login,
        busy,
        run,
    }
}

use Busy::{Defer, Inline, Jump, JumpIf};

/// Every verb the server implements (HELP lists them in this order).
pub(crate) static VERBS: &[Verb] = &[
    v("USER", false, Defer, login::user),
    v("PASS", false, Defer, login::pass),
    v("QUIT", false, Defer, basic::quit),
    v("NOOP", false, Inline, basic::noop),
    v("SYST", false, Defer, basic::syst),
    v("HELP", false, Defer, basic::help),
    v("FEAT", false, Defer, feat::feat),
    v("OPTS", false, Defer, feat::opts),
    v("STAT", true, Inline, stat::stat),
    v("TYPE", true, Defer, params::type_),
    v("MODE", true, Defer, params::mode),
    v("STRU", true, Defer, params::stru),
    v("ALLO", true, Defer, params::allo),
    v("PWD", true, Defer, nav::pwd),
    v("XPWD", true, Defer, nav::pwd),
    v("CWD", true, Defer, nav::cwd),
    v("XCWD", true, Defer, nav::cwd),
    v("CDUP", true, Defer, nav::cdup),
    v("XCUP", true, Defer, nav::cdup),
    v("MKD", true, Defer, fsops::mkd),
    v("XMKD", true, Defer, fsops::mkd),
    v("RMD", true, Defer, fsops::rmd),
    v("XRMD", true, Defer, fsops::rmd),
    v("DELE", true, Defer, fsops::dele),
    v("RNFR", true, Defer, fsops::rnfr),
    v("RNTO", true, Defer, fsops::rnto),
    v("SIZE", true, Defer, info::size),
    v("MDTM", true, Defer, info::mdtm),
    v("MLST", true, Defer, info::mlst),
    v("MLSD", true, Defer, list::mlsd),
    v("LIST", true, Defer, list::list),
    v("NLST", true, Defer, list::nlst),
    v("PASV", true, Defer, pasv::pasv),
    v("EPSV", true, Defer, pasv::epsv),
    v("SPAS", true, Defer, pasv::spas),
    v("PORT", true, Defer, port::port),
    v("EPRT", true, Defer, port::eprt),
    v("SPOR", true, Defer, port::spor),
    v("BPAS", true, Defer, bprt::bpas),
    v("BPRT", true, Defer, bprt::bprt),
    v("RETR", true, Defer, retr::retr),
    v("ERET", true, Defer, retr::eret),
    v("STOR", true, Defer, stor::stor),
    v("APPE", true, Defer, stor::appe),
    v("ESTO", true, Defer, stor::esto),
    v("REST", true, Defer, rest::rest),
    v("ABOR", true, Jump, abor::abor),
    v("SBUF", true, JumpIf(sbuf::is_in_transfer_form), sbuf::sbuf),
    v("SITE", true, Defer, site::site),
    v("CKSM", true, Defer, cksm::cksm),
];

/// The row for `name` (case-insensitive).
pub(crate) fn lookup(name: &str) -> Option<&'static Verb> {
    VERBS.iter().find(|v| v.name.eq_ignore_ascii_case(name))
}

/// Strict decimal `u64`: ASCII digits only (no sign, no spaces, no suffix such as `4M`).
pub(crate) fn parse_u64(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `arg`, or `501 <what> needs an argument.` when it is empty.
pub(crate) fn required<'a>(
    arg: &'a str,
    what: &str,
) -> Result<&'a str, super::error::CommandError> {
    if arg.trim().is_empty() {
        Err(super::error::CommandError::syntax(format!(
            "{what} needs an argument."
        )))
    } else {
        Ok(arg)
    }
}
