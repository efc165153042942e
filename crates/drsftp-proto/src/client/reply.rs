//! Client-side reply framing: turns the server's control-channel bytes into complete (possibly multi-line)
//! FTP replies (RFC 959 §4.2). It owns only framing and the reply value; what a reply *means* is decided by
//! the session (`super::session`) and the marker/feature parsers.

use std::fmt;

/// Longest control line accepted from a server (bytes, without CRLF). Longer lines are a protocol error.
pub const MAX_LINE: usize = 16 * 1024;
/// Most lines accepted in one multi-line reply (a big FEAT or STAT is far below this).
pub const MAX_LINES: usize = 4096;

/// One complete server reply: a three-digit code and its text lines.
///
/// For a single-line reply `lines` has one element (the text after `"ddd "`). For a multi-line reply the first
/// element is the text after `"ddd-"`, the middle elements are the raw continuation lines (leading space kept
/// as sent), and the last element is the text after the closing `"ddd "`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The reply code, 100..=599.
    pub code: u16,
    /// Text lines, see the type docs.
    pub lines: Vec<String>,
}

impl Reply {
    /// A single-line reply (used by tests and by the session for synthetic replies).
    pub fn new(code: u16, text: impl Into<String>) -> Self {
        Reply {
            code,
            lines: vec![text.into()],
        }
    }
    /// First digit of the code: 1 preliminary, 2 completion, 3 intermediate, 4 transient, 5 permanent.
    pub fn class(&self) -> u8 {
        (self.code / 100) as u8
    }
    /// True for 1yz replies (more replies follow for the same command).
    pub fn is_preliminary(&self) -> bool {
        self.class() == 1
    }
    /// True for 2yz replies.
    pub fn is_ok(&self) -> bool {
        self.class() == 2
    }
    /// True for 4yz and 5yz replies.
    pub fn is_error(&self) -> bool {
        self.class() >= 4
    }
    /// The first text line.
    pub fn text(&self) -> &str {
        self.lines.first().map(String::as_str).unwrap_or("")
    }
    /// All text lines joined with '\n'.
    pub fn joined(&self) -> String {
        self.lines.join("\n")
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lines.len() <= 1 {
            write!(f, "{} {}", self.code, self.text())
        } else {
            write!(f, "{} {}", self.code, self.lines.join(" | "))
        }
    }
}

/// Why the server's byte stream could not be framed into replies. After one of these the control connection
/// is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// A line was longer than [`MAX_LINE`].
    #[error("reply line longer than {MAX_LINE} bytes")]
    LineTooLong,
    /// A multi-line reply had more than [`MAX_LINES`] lines.
    #[error("multi-line reply longer than {MAX_LINES} lines")]
    TooManyLines,
    /// A reply did not start with a three-digit code in 100..=599 followed by ' ', '-' or end of line.
    #[error("malformed reply line: {0:?}")]
    Malformed(String),
}

/// Incremental reply reader: feed bytes with [`ReplyReader::push`], take replies with [`ReplyReader::next_reply`].
#[derive(Debug, Default)]
pub struct ReplyReader {
    buf: Vec<u8>,
    /// Open multi-line reply: its code and the lines so far.
    open: Option<(u16, Vec<String>)>,
    failed: bool,
}

fn parse_code(line: &str) -> Option<(u16, Option<char>)> {
    let b = line.as_bytes();
    if b.len() < 3 || !b[..3].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let code: u16 = line[..3].parse().ok()?;
    if !(100..=599).contains(&code) {
        return None;
    }
    match b.get(3) {
        None => Some((code, None)),
        Some(b' ') => Some((code, Some(' '))),
        Some(b'-') => Some((code, Some('-'))),
        Some(_) => None,
    }
}

impl ReplyReader {
    /// An empty reader.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes received from the server.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet part of a complete line.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Returns the next complete reply, `Ok(None)` if more bytes are needed, or an error (sticky).
    pub fn next_reply(&mut self) -> Result<Option<Reply>, ReplyError> {
        if self.failed {
            return Err(ReplyError::Malformed("reader failed earlier".into()));
        }
        let r = self.next_inner();
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    fn next_inner(&mut self) -> Result<Option<Reply>, ReplyError> {
        loop {
            let Some(nl) = self.buf.iter().position(|&c| c == b'\n') else {
                if self.buf.len() > MAX_LINE {
                    return Err(ReplyError::LineTooLong);
                }
                return Ok(None);
            };
            if nl > MAX_LINE + 1 {
                return Err(ReplyError::LineTooLong);
            }
            let mut raw: Vec<u8> = self.buf.drain(..=nl).collect();
            raw.pop();
            if raw.last() == Some(&b'\r') {
                raw.pop();
            }
            let line = String::from_utf8_lossy(&raw).into_owned();
            match self.open.take() {
                None => match parse_code(&line) {
                    Some((code, Some('-'))) => {
                        self.open = Some((code, vec![line[4..].to_string()]))
                    }
                    Some((code, sep)) => {
                        let text = if sep.is_some() {
                            line[4..].to_string()
                        } else {
                            String::new()
                        };
                        return Ok(Some(Reply {
                            code,
                            lines: vec![text],
                        }));
                    }
                    None if line.trim().is_empty() => continue,
                    None => return Err(ReplyError::Malformed(line)),
                },
                Some((code, mut lines)) => {
                    if let Some((c, sep)) = parse_code(&line) {
                        if c == code && sep != Some('-') {
                            let text = if sep.is_some() {
                                line[4..].to_string()
                            } else {
                                String::new()
                            };
                            lines.push(text);
                            return Ok(Some(Reply { code, lines }));
                        }
                    }
                    if lines.len() >= MAX_LINES {
                        return Err(ReplyError::TooManyLines);
                    }
                    lines.push(line);
                    self.open = Some((code, lines));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[u8]) -> Vec<Reply> {
        let mut r = ReplyReader::new();
        r.push(input);
        let mut out = vec![];
        while let Some(x) = r.next_reply().unwrap() {
            out.push(x);
        }
        out
    }

    #[test]
    fn single_and_multiline() {
        let got =
            all(b"220 ready.\r\n211-Extensions supported\r\n PARALLEL\r\n SIZE\r\n211 End.\r\n");
        assert_eq!(got[0], Reply::new(220, "ready."));
        assert_eq!(got[1].code, 211);
        assert_eq!(
            got[1].lines,
            vec!["Extensions supported", " PARALLEL", " SIZE", "End."]
        );
    }

    #[test]
    fn continuation_line_with_other_code_is_text() {
        let got = all(b"112-Perf Marker\r\n Timestamp:  1.5\r\n111 not the end\r\n112 End.\r\n");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].lines.len(), 4);
    }

    #[test]
    fn byte_at_a_time_and_bare_lf() {
        let mut r = ReplyReader::new();
        let mut got = vec![];
        for b in b"150 Beginning transfer.\n226 Transfer Complete.\r\n" {
            r.push(&[*b]);
            while let Some(x) = r.next_reply().unwrap() {
                got.push(x.code);
            }
        }
        assert_eq!(got, vec![150, 226]);
    }

    #[test]
    fn code_without_text() {
        assert_eq!(all(b"200\r\n"), vec![Reply::new(200, "")]);
    }

    #[test]
    fn rejects_garbage_and_overlong() {
        let mut r = ReplyReader::new();
        r.push(b"hello\r\n");
        assert!(matches!(r.next_reply(), Err(ReplyError::Malformed(_))));
        let mut r = ReplyReader::new();
        r.push(&vec![b'2'; MAX_LINE + 10]);
        assert_eq!(r.next_reply(), Err(ReplyError::LineTooLong));
        let mut r = ReplyReader::new();
        r.push(b"999 x\r\n");
        assert!(r.next_reply().is_err());
    }

    #[test]
    fn too_many_lines() {
        let mut r = ReplyReader::new();
        r.push(b"211-x\r\n");
        for _ in 0..MAX_LINES + 1 {
            r.push(b" y\r\n");
        }
        assert_eq!(r.next_reply(), Err(ReplyError::TooManyLines));
    }
}
