//! What a server says it can do: parsing the `211-` FEAT reply (RFC 2389) into [`Features`], plus the
//! checksum-algorithm choice the client uses to verify downloads.

use super::reply::Reply;

/// Features from a FEAT reply: upper-cased feature names with their parameter strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Features {
    entries: Vec<(String, String)>,
}

/// Checksum algorithms the client can compute locally, in order of preference. CRC32C first: it is computed in
/// hardware (SSE4.2) at several GB/s on both ends, so verifying a multi-GB transfer costs well under a second,
/// while SHA-256 at ~0.9 GB/s per core (SHA-NI) made verification longer than the loopback transfer itself
/// (docs/bench/loopback.md). It catches what end-to-end verification is for (corruption by a buggy peer, disk or
/// memory; TCP's own checksum is weak); it is not a defence against an attacker forging data. Servers without
/// CRC32C (Globus) get SHA-256.
pub const VERIFY_PREFERENCE: &[&str] = &["CRC32C", "SHA256", "SHA512", "SHA1", "MD5", "ADLER32"];

impl Features {
    /// Parses a 211 FEAT reply. Any other code gives an empty set (FEAT unsupported).
    pub fn parse(reply: &Reply) -> Features {
        let mut entries = Vec::new();
        if reply.code == 211 && reply.lines.len() > 2 {
            for line in &reply.lines[1..reply.lines.len() - 1] {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let (name, params) = line.split_once(' ').unwrap_or((line, ""));
                entries.push((name.to_ascii_uppercase(), params.trim().to_string()));
            }
        }
        Features { entries }
    }

    /// Builds a feature set from `(name, params)` pairs (tests, fixed configurations).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Features {
        Features {
            entries: pairs
                .into_iter()
                .map(|(n, p)| (n.to_ascii_uppercase(), p.to_string()))
                .collect(),
        }
    }

    /// True if the feature name (case-insensitive) was listed.
    pub fn has(&self, name: &str) -> bool {
        self.entries
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
    }

    /// The parameter strings of every line listing a feature: a server may list one line per mechanism
    /// (pyftpdlib: `AUTH SSL`, then `AUTH TLS`).
    pub fn params_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.entries
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, p)| p.as_str())
    }

    /// The parameter string of a feature, if listed.
    pub fn params(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, p)| p.as_str())
    }

    /// Feature names, in server order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// True when the server can be driven in MODE E with parallel streams (`PARALLEL`, GFD.20).
    pub fn parallel(&self) -> bool {
        self.has("PARALLEL")
    }

    /// True when the server offers Dynamic Right-Sizing (the drsftp FEAT token `DRS`, docs/drs.md §4.3): only
    /// then may a client send `OPTS DRS Inband=1;`. Globus servers never list it.
    pub fn drs(&self) -> bool {
        self.has("DRS")
    }

    /// The stripe count a drsftp server announces (`STRIPES n`: the data movers a SPAS would answer with, 1 for a
    /// server that moves its own data). GFD.20's FEAT has no way to say "one stripe", so without this line a
    /// client can only learn it by asking SPAS, a round trip before any MODE E download can listen.
    pub fn stripes(&self) -> Option<u32> {
        self.params("STRIPES")?
            .trim()
            .parse()
            .ok()
            .filter(|&n| n >= 1)
    }

    /// The CKSM algorithms listed, upper-cased: Globus sends `CKSM MD5:10;ADLER32:10;SHA256:11;`, others a
    /// comma-separated list. Weights after ':' are dropped.
    pub fn checksum_algorithms(&self) -> Vec<String> {
        let Some(p) = self.params("CKSM") else {
            return Vec::new();
        };
        p.split([';', ','])
            .map(|a| {
                a.split(':')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_uppercase()
            })
            .filter(|a| !a.is_empty())
            .collect()
    }

    /// The best algorithm for verifying a transfer that both sides support, per [`VERIFY_PREFERENCE`].
    pub fn verify_algorithm(&self) -> Option<&'static str> {
        let algs = self.checksum_algorithms();
        VERIFY_PREFERENCE
            .iter()
            .copied()
            .find(|p| algs.iter().any(|a| a == p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn globus() -> Reply {
        let mut lines = vec!["Extensions supported".to_string()];
        for l in [
            " CKSM MD5:10;ADLER32:10;SHA1:10;SHA256:11;SHA512:12;",
            " DSI file-13.24",
            " PARALLEL",
            " SIZE",
            " ERET",
            " ESTO",
            " MLST Type*;Size*;Modify*;",
            " PASV AllowDelayed;",
        ] {
            lines.push(l.to_string());
        }
        lines.push("End.".into());
        Reply { code: 211, lines }
    }

    #[test]
    fn globus_feat() {
        let f = Features::parse(&globus());
        assert!(f.parallel() && f.has("eret") && f.has("ESTO") && f.has("MLST"));
        assert!(!f.has("SBUF"));
        assert!(!f.drs(), "Globus knows nothing of DRS");
        assert_eq!(f.params("PASV"), Some("AllowDelayed;"));
        assert_eq!(
            f.checksum_algorithms(),
            vec!["MD5", "ADLER32", "SHA1", "SHA256", "SHA512"]
        );
        assert_eq!(f.verify_algorithm(), Some("SHA256"));
    }

    #[test]
    fn md5_only_and_none() {
        let f = Features::from_pairs([("CKSM", "MD5")]);
        assert_eq!(f.verify_algorithm(), Some("MD5"));
        let f = Features::from_pairs([("CKSM", "SHA256,MD5,ADLER32,CRC32C")]);
        assert_eq!(f.verify_algorithm(), Some("CRC32C"));
        let f = Features::from_pairs([("CKSM", "SHA256,MD5,ADLER32")]);
        assert_eq!(f.verify_algorithm(), Some("SHA256"));
        assert_eq!(
            Features::parse(&Reply::new(500, "no")).verify_algorithm(),
            None
        );
        assert_eq!(
            Features::from_pairs([("CKSM", "WHIRLPOOL")]).verify_algorithm(),
            None
        );
    }
}
