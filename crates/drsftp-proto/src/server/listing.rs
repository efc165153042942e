//! Directory-listing and time formats: `LIST` lines (`ls -l` style), `NLST` names, MLSx facts (RFC 3659) with the
//! `OPTS MLST` fact selection, and `MDTM`/`modify=` timestamps from a small civil-date conversion (no chrono).

use std::time::SystemTime;

use drsftp_storage::{EntryKind, Metadata};

use crate::civil::{civil, unix_secs};

/// Latest time with a four-digit year (9999-12-31T23:59:59Z).
const MAX_SECS: i64 = 253_402_300_799;

/// `YYYYMMDDHHMMSS` (MDTM, MLSx `modify`), clamped to years 1970..=9999.
pub(crate) fn timeval(t: SystemTime) -> String {
    let c = civil(unix_secs(t).clamp(0, MAX_SECS));
    format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}",
        c.year, c.month, c.day, c.hour, c.min, c.sec
    )
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Names in listings: control characters (a newline would forge an entry) become `?`.
pub(crate) fn clean_name(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

fn perm_string(kind: EntryKind, mode: u32) -> String {
    let mut s = String::with_capacity(10);
    s.push(match kind {
        EntryKind::Dir => 'd',
        EntryKind::File => '-',
        EntryKind::Other => '?',
    });
    for shift in [6u32, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

/// One `LIST` line: `-rw-r--r-- 1 ftp ftp <size> Mon DD HH:MM name`; files more than ~6 months from `now`
/// (epoch seconds, if known) show `Mon DD  YYYY` instead of the time.
pub(crate) fn list_line(m: &Metadata, name: &str, now: Option<i64>) -> String {
    let secs = unix_secs(m.modified).clamp(0, MAX_SECS);
    let c = civil(secs);
    let mon = MONTHS[(c.month.clamp(1, 12) - 1) as usize];
    const HALF_YEAR: i64 = 182 * 86_400;
    let recent = match now {
        None => true,
        Some(n) => secs <= n.saturating_add(3600) && n.saturating_sub(secs) < HALF_YEAR,
    };
    let when = if recent {
        format!("{:02}:{:02}", c.hour, c.min)
    } else {
        format!(" {:04}", c.year)
    };
    format!(
        "{} 1 ftp ftp {:>12} {mon} {:>2} {when} {}",
        perm_string(m.kind, m.mode),
        m.size,
        c.day,
        clean_name(name)
    )
}

/// Which MLSx facts are sent (`OPTS MLST`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FactSet(u8);

/// Fact names as advertised, in output order.
pub(crate) const FACTS: [&str; 5] = ["Type", "Size", "Modify", "Perm", "UNIX.mode"];

impl Default for FactSet {
    fn default() -> Self {
        FactSet(0b1_1111)
    }
}

impl FactSet {
    /// Parses `type;size;` (case-insensitive; unknown facts ignored, RFC 3659 §7.9).
    pub(crate) fn parse(list: &str) -> FactSet {
        let mut bits = 0u8;
        for want in list.split(';').map(str::trim) {
            if let Some(i) = FACTS.iter().position(|f| f.eq_ignore_ascii_case(want)) {
                bits |= 1 << i;
            }
        }
        FactSet(bits)
    }

    fn has(self, i: usize) -> bool {
        self.0 & (1 << i) != 0
    }

    /// The FEAT form: `Type*;Size*;...` with `*` on selected facts.
    pub(crate) fn feat(self) -> String {
        FACTS
            .iter()
            .enumerate()
            .map(|(i, f)| format!("{f}{};", if self.has(i) { "*" } else { "" }))
            .collect()
    }

    /// The selected facts, `Type;Size;` (the `OPTS MLST` reply).
    pub(crate) fn selected(self) -> String {
        FACTS
            .iter()
            .enumerate()
            .filter(|(i, _)| self.has(*i))
            .map(|(_, f)| format!("{f};"))
            .collect()
    }
}

/// MLSx facts of `m`: `type=file;size=N;modify=YYYYMMDDHHMMSS;perm=...;UNIX.mode=0644;`.
pub(crate) fn facts(m: &Metadata, set: FactSet) -> String {
    let mut s = String::new();
    if set.has(0) {
        s.push_str(match m.kind {
            EntryKind::File => "type=file;",
            EntryKind::Dir => "type=dir;",
            EntryKind::Other => "type=OS.unix=other;",
        });
    }
    if set.has(1) {
        s.push_str(&format!("size={};", m.size));
    }
    if set.has(2) {
        s.push_str(&format!("modify={};", timeval(m.modified)));
    }
    if set.has(3) {
        let owner = (m.mode >> 6) & 7;
        let perm = match m.kind {
            EntryKind::File => {
                let mut p = String::new();
                if owner & 2 != 0 {
                    p.push_str("adfw");
                }
                if owner & 4 != 0 {
                    p.push('r');
                }
                p
            }
            EntryKind::Dir => {
                let mut p = String::new();
                if owner & 2 != 0 {
                    p.push_str("cdfmp");
                }
                if owner & 1 != 0 {
                    p.push('e');
                }
                if owner & 4 != 0 {
                    p.push('l');
                }
                p
            }
            EntryKind::Other => String::new(),
        };
        s.push_str(&format!("perm={perm};"));
    }
    if set.has(4) {
        s.push_str(&format!("UNIX.mode=0{:o};", m.mode & 0o7777));
    }
    s
}

/// One MLSD entry / MLST fact line: `facts name` (RFC 3659: facts, one space, name).
pub(crate) fn mlsx_line(m: &Metadata, name: &str, set: FactSet) -> String {
    format!("{} {}", facts(m, set), clean_name(name))
}

/// Which listing a data connection carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `LIST`: `ls -l` style lines.
    List,
    /// `NLST`: bare names.
    Nlst,
    /// `MLSD`: RFC 3659 facts and name.
    Mlsd,
}

/// How a directory's entries become listing lines, fixed when the transfer starts (the session's clock and its
/// `OPTS MLST` facts), so the driver can format entries as it reads them from the directory
/// ([`Payload::SendListing`](super::Payload::SendListing)) instead of holding the whole listing in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListFormat {
    kind: ListKind,
    now: Option<i64>,
    facts: FactSet,
}

impl ListFormat {
    pub(crate) fn new(kind: ListKind, now: Option<i64>, facts: FactSet) -> ListFormat {
        ListFormat { kind, now, facts }
    }

    /// Which listing this is.
    pub fn kind(&self) -> ListKind {
        self.kind
    }

    /// One entry's line in this format, without the CRLF.
    pub fn line(&self, m: &Metadata) -> String {
        self.line_named(m, &m.name)
    }

    /// `m`'s line under the name `name` (LIST of a file names it as the client did).
    pub(crate) fn line_named(&self, m: &Metadata, name: &str) -> String {
        match self.kind {
            ListKind::List => list_line(m, name, self.now),
            ListKind::Nlst => clean_name(name),
            ListKind::Mlsd => mlsx_line(m, name, self.facts),
        }
    }

    /// Appends `m`'s line and its CRLF to `out`.
    pub fn push_line(&self, m: &Metadata, out: &mut Vec<u8>) {
        out.extend_from_slice(self.line(m).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// Listing bytes: each line followed by CRLF.
pub(crate) fn to_bytes(lines: &[String]) -> Vec<u8> {
    let mut out = Vec::with_capacity(lines.iter().map(|l| l.len() + 2).sum());
    for l in lines {
        out.extend_from_slice(l.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    /// Metadata for tests: `secs` after the epoch.
    pub(crate) fn meta(name: &str, kind: EntryKind, size: u64, secs: u64, mode: u32) -> Metadata {
        Metadata {
            name: name.into(),
            kind,
            size,
            modified: UNIX_EPOCH + Duration::from_secs(secs),
            mode,
        }
    }

    #[test]
    fn civil_dates() {
        let c = civil(0);
        assert_eq!((c.year, c.month, c.day, c.hour), (1970, 1, 1, 0));
        // 2026-11-22 14:51:17 UTC (the Globus MLST example in notes §3.6).
        let c = civil(1_795_359_077);
        assert_eq!((c.year, c.month, c.day), (2026, 11, 22));
        assert_eq!((c.hour, c.min, c.sec), (14, 51, 17));
        // Leap day and the day before the epoch.
        let c = civil(951_782_400);
        assert_eq!((c.year, c.month, c.day), (2000, 2, 29));
        let c = civil(-1);
        assert_eq!(
            (c.year, c.month, c.day, c.hour, c.min, c.sec),
            (1969, 12, 31, 23, 59, 59)
        );
        assert_eq!(
            timeval(UNIX_EPOCH + Duration::from_secs(1_795_359_077)),
            "20261122145117"
        );
        assert_eq!(
            timeval(UNIX_EPOCH - Duration::from_millis(1500)),
            "19700101000000"
        );
    }

    #[test]
    fn list_and_mlsd_lines() {
        let f = meta("f200M", EntryKind::File, 209_715_200, 1_795_359_077, 0o644);
        let now = 1_795_359_077 + 86_400;
        assert_eq!(
            list_line(&f, "f200M", Some(now)),
            "-rw-r--r-- 1 ftp ftp    209715200 Nov 22 14:51 f200M"
        );
        assert_eq!(
            list_line(&f, "f200M", Some(now + 400 * 86_400)),
            "-rw-r--r-- 1 ftp ftp    209715200 Nov 22  2026 f200M"
        );
        let d = meta("sub", EntryKind::Dir, 0, 86_400 * 3, 0o755);
        assert_eq!(
            list_line(&d, "sub", None),
            "drwxr-xr-x 1 ftp ftp            0 Jan  4 00:00 sub"
        );
        assert_eq!(
            mlsx_line(&f, "f200M", FactSet::default()),
            "type=file;size=209715200;modify=20261122145117;perm=adfwr;UNIX.mode=0644; f200M"
        );
        assert_eq!(
            mlsx_line(&d, "a\nb", FactSet::parse("type;unix.MODE;bogus")),
            "type=dir;UNIX.mode=0755; a?b"
        );
        assert_eq!(
            FactSet::default().feat(),
            "Type*;Size*;Modify*;Perm*;UNIX.mode*;"
        );
        assert_eq!(
            FactSet::parse("size;").feat(),
            "Type;Size*;Modify;Perm;UNIX.mode;"
        );
        assert_eq!(to_bytes(&["a".into(), "b".into()]), b"a\r\nb\r\n");
    }
}
