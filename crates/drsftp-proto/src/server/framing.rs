//! Command-line framing for the server's control channel: splits bytes into lines at LF (a CR before it is
//! dropped), strips Telnet IAC sequences (`IAC IP`, `IAC DM` sent before ABOR, option negotiation), and turns a
//! line longer than the configured limit into one [`Line::TooLong`] while discarding the rest of it.

use std::collections::VecDeque;

/// One framed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Line {
    /// A line without its line end (invalid UTF-8 replaced).
    Text(String),
    /// The line exceeded the limit; its remaining bytes up to the next LF are discarded.
    TooLong,
}

const IAC: u8 = 0xFF;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Telnet {
    Data,
    /// After IAC: a command byte follows.
    Iac,
    /// After IAC WILL/WONT/DO/DONT: an option byte follows.
    Option,
}

/// Incremental line splitter; holds at most `max + 1` bytes of an unfinished line.
#[derive(Debug)]
pub(crate) struct LineReader {
    buf: Vec<u8>,
    max: usize,
    discarding: bool,
    telnet: Telnet,
}

impl LineReader {
    /// A reader accepting lines of up to `max` bytes (without the line end).
    pub(crate) fn new(max: usize) -> Self {
        LineReader {
            buf: Vec::new(),
            max,
            discarding: false,
            telnet: Telnet::Data,
        }
    }

    /// Whether bytes of an unfinished line (or a telnet sequence) are held: after `AUTH TLS` that means
    /// cleartext was pipelined behind the command.
    pub(crate) fn has_partial(&self) -> bool {
        !self.buf.is_empty() || self.discarding || !matches!(self.telnet, Telnet::Data)
    }

    /// Feeds bytes; every completed line (or overflow) is appended to `out`.
    pub(crate) fn push(&mut self, bytes: &[u8], out: &mut VecDeque<Line>) {
        for &b in bytes {
            match self.telnet {
                Telnet::Iac => {
                    self.telnet = match b {
                        IAC => {
                            self.byte(IAC, out);
                            Telnet::Data
                        }
                        0xFB..=0xFE => Telnet::Option,
                        _ => Telnet::Data,
                    };
                }
                Telnet::Option => self.telnet = Telnet::Data,
                Telnet::Data if b == IAC => self.telnet = Telnet::Iac,
                Telnet::Data => self.byte(b, out),
            }
        }
    }

    fn byte(&mut self, b: u8, out: &mut VecDeque<Line>) {
        if b == b'\n' {
            if self.discarding {
                self.discarding = false;
                return;
            }
            let mut line = std::mem::take(&mut self.buf);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.len() > self.max {
                out.push_back(Line::TooLong);
            } else {
                out.push_back(Line::Text(String::from_utf8_lossy(&line).into_owned()));
            }
            return;
        }
        if self.discarding {
            return;
        }
        // Room for `max` bytes plus a CR that the LF will strip.
        if self.buf.len() > self.max {
            self.buf.clear();
            self.discarding = true;
            out.push_back(Line::TooLong);
            return;
        }
        self.buf.push(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(max: usize, chunks: &[&[u8]]) -> Vec<Line> {
        let mut r = LineReader::new(max);
        let mut out = VecDeque::new();
        for c in chunks {
            r.push(c, &mut out);
        }
        out.into_iter().collect()
    }

    fn text(s: &str) -> Line {
        Line::Text(s.into())
    }

    #[test]
    fn crlf_and_bare_lf_in_any_chunking() {
        let all = b"USER a\r\nPASS b\nNOOP\r\n";
        for split in 0..all.len() {
            let (a, b) = all.split_at(split);
            assert_eq!(
                lines(64, &[a, b]),
                vec![text("USER a"), text("PASS b"), text("NOOP")]
            );
        }
    }

    #[test]
    fn telnet_interrupt_before_abor_is_stripped() {
        // IAC IP IAC DM ABOR, as RFC 959 clients send it; IAC IAC is a literal 0xFF; WILL x is skipped.
        let got = lines(
            64,
            &[
                b"\xff\xf4\xff",
                b"\xf2ABOR\r\n",
                b"\xff\xfb\x01NO\xff\xf1OP\r\n",
            ],
        );
        assert_eq!(got, vec![text("ABOR"), text("NOOP")]);
        assert_eq!(lines(64, &[b"A\xff\xffB\n"]), vec![text("A\u{fffd}B")]);
    }

    #[test]
    fn overlong_line_reported_once_and_rest_discarded() {
        let got = lines(
            8,
            &[b"123456789", b"abcdef", b"xyz\r\nNOOP\r\n12345678\r\n"],
        );
        assert_eq!(got, vec![Line::TooLong, text("NOOP"), text("12345678")]);
        // Exactly max bytes plus CR is fine; max + 1 bytes before CRLF is not.
        assert_eq!(
            lines(4, &[b"1234\r\n12345\r\n"]),
            vec![text("1234"), Line::TooLong]
        );
    }
}
