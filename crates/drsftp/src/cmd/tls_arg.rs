//! The client's TLS options, shared by `drsftp copy` and `drsftp ls`: `--tls require|auto|off`, `--cacert` and
//! `--tls-fingerprint`, turned into `drsftp_io::tls::TlsSettings`.

use std::path::PathBuf;

use anyhow::{Context, Result};
use drsftp_io::tls::{parse_fingerprint, TlsMode, TlsSettings, Trust};

/// `--tls` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsArg {
    /// Fail unless the server offers `AUTH TLS`.
    Require,
    /// TLS whenever the server's FEAT lists `AUTH TLS`, cleartext otherwise.
    Auto,
    /// Never TLS.
    Off,
}

/// Explicit FTPS (RFC 4217) options.
#[derive(clap::Args, Debug, Clone)]
pub struct TlsArgs {
    /// Explicit FTPS: `AUTH TLS` before USER, then `PBSZ 0` + `PROT P` so the password and the data are
    /// encrypted (stream mode). `auto` uses it when the server's FEAT lists `AUTH TLS`; once asked for, a
    /// failed handshake is an error, never a retry in cleartext.
    #[arg(long, value_enum, default_value_t = TlsArg::Auto, value_name = "WHEN")]
    pub tls: TlsArg,
    /// Trust only the CA certificate(s) in this PEM file (default: the Mozilla roots built in).
    #[arg(long, value_name = "PEM", conflicts_with = "tls_fingerprint")]
    pub cacert: Option<PathBuf>,
    /// Accept exactly the server certificate with this SHA-256 fingerprint (hex, colons allowed), e.g. a
    /// self-signed one; the host name is then not checked.
    #[arg(long, value_name = "SHA256")]
    pub tls_fingerprint: Option<String>,
}

impl TlsArgs {
    /// The settings for the client library.
    pub fn settings(&self) -> Result<TlsSettings> {
        let trust = match (&self.cacert, &self.tls_fingerprint) {
            (_, Some(f)) => Trust::Fingerprint(parse_fingerprint(f).context("--tls-fingerprint")?),
            (Some(p), None) => Trust::CaFile(p.clone()),
            (None, None) => Trust::SystemRoots,
        };
        let mode = match self.tls {
            TlsArg::Require => TlsMode::Require,
            TlsArg::Auto => TlsMode::Auto,
            TlsArg::Off => TlsMode::Off,
        };
        Ok(TlsSettings { mode, trust })
    }
}
