//! TYPE, MODE, STRU and ALLO: data-representation parameters. They take effect for the next transfer command
//! whenever they are sent (more lenient than Globus, which freezes them at PASV/PORT: curl sends EPSV before
//! TYPE I and must still get binary data, notes G1).

use std::time::Instant;

use super::Verb;
use crate::server::ctx::Ctx;
use crate::server::error::{CmdResult, CommandError};
use crate::server::types::Mode;

pub(super) const TYPE: Verb = Verb::cmd("TYPE", type_);
pub(super) const MODE: Verb = Verb::cmd("MODE", mode);
pub(super) const STRU: Verb = Verb::cmd("STRU", stru);
pub(super) const ALLO: Verb = Verb::cmd("ALLO", allo);

/// `TYPE A [N]`, `TYPE I`, `TYPE L 8`.
fn type_(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let words: Vec<String> = arg
        .split_whitespace()
        .map(str::to_ascii_uppercase)
        .collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    match words.as_slice() {
        ["A"] | ["A", "N"] => {
            ctx.data.ascii = true;
            ctx.reply(200, "Type set to A.");
        }
        ["I"] | ["L", "8"] => {
            ctx.data.ascii = false;
            ctx.reply(200, "Type set to I.");
        }
        ["A", "T" | "C"] | ["E"] | ["E", _] | ["L", _] => {
            return Err(CommandError::Unsupported(
                "Type not implemented for that parameter.".into(),
            ))
        }
        _ => return Err(CommandError::syntax("Syntax error in TYPE parameters.")),
    }
    Ok(())
}

/// `MODE S` / `MODE E`.
fn mode(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let m = match arg.trim().to_ascii_uppercase().as_str() {
        "S" => Mode::Stream,
        "E" => Mode::Extended,
        "B" | "C" => return Err(CommandError::Unsupported("Mode not implemented.".into())),
        _ => return Err(CommandError::syntax("Syntax error in MODE parameter.")),
    };
    ctx.data.mode = m;
    let letter = if m == Mode::Stream { 'S' } else { 'E' };
    ctx.reply(200, &format!("Mode set to {letter}."));
    Ok(())
}

/// `STRU F` (record and page structures are not implemented).
fn stru(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    match arg.trim().to_ascii_uppercase().as_str() {
        "F" => {
            ctx.reply(200, "Structure set to F.");
            Ok(())
        }
        "R" | "P" => Err(CommandError::Unsupported(
            "Structure not implemented.".into(),
        )),
        _ => Err(CommandError::syntax("Syntax error in STRU parameter.")),
    }
}

/// `ALLO <size> [R <record>]`: the size of the next upload (a shorter upload then fails).
fn allo(ctx: &mut Ctx, _now: Instant, arg: &str) -> CmdResult {
    let mut words = arg.split_whitespace();
    let size = words.next().and_then(super::parse_u64);
    let tail_ok = match (words.next(), words.next(), words.next()) {
        (None, _, _) => true,
        (Some(r), Some(n), None) => r.eq_ignore_ascii_case("R") && super::parse_u64(n).is_some(),
        _ => false,
    };
    match size {
        Some(n) if tail_ok => {
            ctx.data.allo = Some(n);
            ctx.reply(200, "ALLO command successful.");
            Ok(())
        }
        _ => Err(CommandError::syntax("Syntax error in ALLO parameters.")),
    }
}

#[cfg(test)]
mod tests {
    use crate::server::testutil::H;

    #[test]
    fn type_mode_stru_allo() {
        let mut h = H::new();
        h.login();
        assert_eq!(h.cmd("TYPE I"), "200 Type set to I.\r\n");
        assert_eq!(h.cmd("type l 8"), "200 Type set to I.\r\n");
        assert_eq!(h.cmd("TYPE A N"), "200 Type set to A.\r\n");
        assert!(h.cmd("TYPE E").starts_with("504 "));
        assert!(h.cmd("TYPE L 7").starts_with("504 "));
        assert!(h.cmd("TYPE").starts_with("501 "));
        assert!(h.cmd("TYPE X Y Z").starts_with("501 "));
        assert_eq!(h.cmd("MODE E"), "200 Mode set to E.\r\n");
        assert_eq!(h.cmd("MODE s"), "200 Mode set to S.\r\n");
        assert!(h.cmd("MODE B").starts_with("504 "));
        assert!(h.cmd("MODE Q").starts_with("501 "));
        assert_eq!(h.cmd("STRU F"), "200 Structure set to F.\r\n");
        assert!(h.cmd("STRU R").starts_with("504 "));
        assert_eq!(h.cmd("ALLO 209715200"), "200 ALLO command successful.\r\n");
        assert_eq!(h.cmd("ALLO 10 R 5"), "200 ALLO command successful.\r\n");
        assert!(h.cmd("ALLO -1").starts_with("501 "));
        assert!(h.cmd("ALLO 1 X 2").starts_with("501 "));
    }
}
