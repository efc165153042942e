//! `CommandError`: why a verb handler refused a command, and the reply code each refusal maps to. Handlers return
//! it; the session turns it into the one reply line.

/// A refused command. The display text is the reply text (without the code).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CommandError {
    /// Malformed arguments: `501`.
    #[error("{0}")]
    Syntax(String),
    /// Well-formed but unsupported parameter (TYPE E, MODE B, unknown ESTO mode, PORT bounce): `504`.
    #[error("{0}")]
    Unsupported(String),
    /// Command out of sequence (RNTO without RNFR, PASS without USER): `503`.
    #[error("{0}")]
    Sequence(String),
    /// No data endpoint yet, or it cannot be opened: `425`.
    #[error("{0}")]
    NoData(String),
    /// Any other code with its text.
    #[error("{1}")]
    Reply(u16, String),
}

impl CommandError {
    /// The FTP reply code.
    pub(crate) fn code(&self) -> u16 {
        match self {
            CommandError::Syntax(_) => 501,
            CommandError::Unsupported(_) => 504,
            CommandError::Sequence(_) => 503,
            CommandError::NoData(_) => 425,
            CommandError::Reply(c, _) => *c,
        }
    }

    /// `501` with `text`.
    pub(crate) fn syntax(text: impl Into<String>) -> Self {
        CommandError::Syntax(text.into())
    }
}

/// Result of a verb handler.
pub(crate) type CmdResult = Result<(), CommandError>;
