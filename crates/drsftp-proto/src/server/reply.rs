//! Reply formatting for the server: single-line `ddd text` and multi-line `ddd-` … `ddd ` replies (RFC 959
//! §4.2). Text is sanitised here, once: control characters (CR, LF, NUL, …) become `?`, so nothing a client sent
//! can break the reply framing, and continuation lines always start with a space.

/// Longest reply text kept (longer text is cut; whole replies stay well under client line limits).
pub(crate) const MAX_TEXT: usize = 2048;

/// `text` with control characters replaced by `?` and cut to [`MAX_TEXT`] bytes (on a char boundary).
pub(crate) fn sanitize(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(MAX_TEXT));
    for c in text.chars() {
        if out.len() + c.len_utf8() > MAX_TEXT {
            break;
        }
        out.push(if c.is_control() { '?' } else { c });
    }
    out
}

/// A reply code usable on the wire (100..=599); anything else becomes 451.
fn valid_code(code: u16) -> u16 {
    if (100..=599).contains(&code) {
        code
    } else {
        451
    }
}

/// `ddd text\r\n`.
pub(crate) fn single(code: u16, text: &str) -> Vec<u8> {
    format!("{} {}\r\n", valid_code(code), sanitize(text)).into_bytes()
}

/// `ddd-first\r\n`, one ` line\r\n` per body line (a leading space is added if missing), `ddd last\r\n`.
pub(crate) fn multi(code: u16, first: &str, body: &[String], last: &str) -> Vec<u8> {
    let code = valid_code(code);
    let mut s = format!("{code}-{}\r\n", sanitize(first));
    for line in body {
        let l = sanitize(line);
        if !l.starts_with(' ') {
            s.push(' ');
        }
        s.push_str(&l);
        s.push_str("\r\n");
    }
    s.push_str(&format!("{code} {}\r\n", sanitize(last)));
    s.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_cannot_break_framing() {
        assert_eq!(single(550, "a\r\n226 fake"), b"550 a??226 fake\r\n");
        assert_eq!(single(42, "x"), b"451 x\r\n");
        let m = String::from_utf8(multi(211, "Hi", &["A".into(), " B\n".into()], "End.")).unwrap();
        assert_eq!(m, "211-Hi\r\n A\r\n B?\r\n211 End.\r\n");
        assert!(sanitize(&"é".repeat(5000)).len() <= MAX_TEXT);
    }
}
