//! CKSM checksums over a byte range of a file (SHA256, SHA1, MD5, ADLER32, CRC32C), plus one-shot and streaming
//! helpers that produce the same lower-case hex.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::Digest;

use crate::{FileHandle, StorageError};

/// A checksum algorithm CKSM accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChecksumAlg {
    /// SHA-256.
    Sha256,
    /// SHA-1.
    Sha1,
    /// MD5.
    Md5,
    /// Adler-32 (8 lower-case hex digits, as Globus prints it).
    Adler32,
    /// CRC-32C (Castagnoli), 8 lower-case hex digits.
    Crc32c,
}

impl ChecksumAlg {
    /// All algorithms, in FEAT order.
    pub const ALL: [ChecksumAlg; 5] = [
        ChecksumAlg::Sha256,
        ChecksumAlg::Sha1,
        ChecksumAlg::Md5,
        ChecksumAlg::Adler32,
        ChecksumAlg::Crc32c,
    ];
    /// The name on the wire (`SHA256`, `SHA1`, `MD5`, `ADLER32`, `CRC32C`).
    pub fn name(self) -> &'static str {
        match self {
            ChecksumAlg::Sha256 => "SHA256",
            ChecksumAlg::Sha1 => "SHA1",
            ChecksumAlg::Md5 => "MD5",
            ChecksumAlg::Adler32 => "ADLER32",
            ChecksumAlg::Crc32c => "CRC32C",
        }
    }
}

impl FromStr for ChecksumAlg {
    type Err = StorageError;
    fn from_str(s: &str) -> Result<Self, StorageError> {
        ChecksumAlg::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| StorageError::Invalid(format!("unsupported checksum algorithm {s}")))
    }
}

/// Chunk size for checksum reads.
const CHUNK: usize = 1 << 20;

/// Incremental checksum state, for callers that see the bytes as they stream past (e.g. a data engine).
#[derive(Clone)]
pub struct Checksummer(State);

#[derive(Clone)]
enum State {
    Sha256(sha2::Sha256),
    Sha1(sha1::Sha1),
    Md5(md5::Md5),
    Adler32(adler32::RollingAdler32),
    Crc32c(u32),
}

impl std::fmt::Debug for Checksummer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Checksummer")
            .field(&self.alg().name())
            .finish()
    }
}

impl Checksummer {
    /// Empty state for `alg`.
    pub fn new(alg: ChecksumAlg) -> Self {
        Checksummer(match alg {
            ChecksumAlg::Sha256 => State::Sha256(sha2::Sha256::new()),
            ChecksumAlg::Sha1 => State::Sha1(sha1::Sha1::new()),
            ChecksumAlg::Md5 => State::Md5(md5::Md5::new()),
            ChecksumAlg::Adler32 => State::Adler32(adler32::RollingAdler32::new()),
            ChecksumAlg::Crc32c => State::Crc32c(0),
        })
    }

    /// The algorithm.
    pub fn alg(&self) -> ChecksumAlg {
        match self.0 {
            State::Sha256(_) => ChecksumAlg::Sha256,
            State::Sha1(_) => ChecksumAlg::Sha1,
            State::Md5(_) => ChecksumAlg::Md5,
            State::Adler32(_) => ChecksumAlg::Adler32,
            State::Crc32c(_) => ChecksumAlg::Crc32c,
        }
    }

    /// Feed the next bytes (in file order).
    pub fn update(&mut self, data: &[u8]) {
        match &mut self.0 {
            State::Sha256(h) => h.update(data),
            State::Sha1(h) => h.update(data),
            State::Md5(h) => h.update(data),
            State::Adler32(h) => h.update_buffer(data),
            State::Crc32c(c) => *c = crc32c::crc32c_append(*c, data),
        }
    }

    /// The checksum in lower-case hex (8 digits for ADLER32 and CRC32C).
    pub fn finish(self) -> String {
        match self.0 {
            State::Sha256(h) => hex(&h.finalize()),
            State::Sha1(h) => hex(&h.finalize()),
            State::Md5(h) => hex(&h.finalize()),
            State::Adler32(h) => format!("{:08x}", h.hash()),
            State::Crc32c(c) => format!("{c:08x}"),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// Checksum of a whole byte slice, lower-case hex.
pub fn checksum_bytes(alg: ChecksumAlg, data: &[u8]) -> String {
    let mut c = Checksummer::new(alg);
    c.update(data);
    c.finish()
}

/// Checksum of `offset..offset+length` (`None` = to the end) of `file`, lower-case hex.
///
/// `offset` may equal the file size (an empty range); beyond it is [`StorageError::Invalid`] (reply 501). A
/// `length` reaching past the end is clamped to the end of the file. Reads go in 1 MiB positioned chunks, so the
/// handle may be shared with concurrent readers.
pub fn checksum(
    file: &dyn FileHandle,
    alg: ChecksumAlg,
    offset: u64,
    length: Option<u64>,
) -> Result<String, StorageError> {
    checksum_until(file, alg, offset, length, &AtomicBool::new(false))
}

/// [`checksum`] that gives up between two chunks once `stop` is set ([`StorageError::Invalid`]): a server stops
/// hashing for a session that has ended, so a client that asks for a digest of a huge file and hangs up leaves
/// no disk and CPU work behind.
pub fn checksum_until(
    file: &dyn FileHandle,
    alg: ChecksumAlg,
    offset: u64,
    length: Option<u64>,
    stop: &AtomicBool,
) -> Result<String, StorageError> {
    let size = file.len()?;
    if offset > size {
        return Err(StorageError::Invalid(format!(
            "checksum offset {offset} beyond end of file ({size} bytes)"
        )));
    }
    let end = match length {
        Some(l) => offset.saturating_add(l).min(size),
        None => size,
    };
    let mut state = Checksummer::new(alg);
    let mut buf = vec![
        0u8;
        CHUNK
            .min(usize::try_from(end - offset).unwrap_or(CHUNK))
            .max(1)
    ];
    let mut pos = offset;
    while pos < end {
        if stop.load(Ordering::Relaxed) {
            return Err(StorageError::Invalid("checksum abandoned".into()));
        }
        let want = usize::try_from(end - pos).map_or(buf.len(), |r| r.min(buf.len()));
        let n = file.read_at(&mut buf[..want], pos)?;
        if n == 0 {
            // The file shrank underneath us: checksum what was there.
            break;
        }
        state.update(&buf[..n]);
        pos += n as u64;
    }
    Ok(state.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BytesFile;

    #[test]
    fn known_vectors() {
        assert_eq!(
            checksum_bytes(ChecksumAlg::Sha256, b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            checksum_bytes(ChecksumAlg::Sha1, b"abc"),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            checksum_bytes(ChecksumAlg::Md5, b""),
            "d41d8cd98f00b204e9800998ecf8427e"
        );
        assert_eq!(
            checksum_bytes(ChecksumAlg::Adler32, b"Wikipedia"),
            "11e60398"
        );
        assert_eq!(
            checksum_bytes(ChecksumAlg::Crc32c, b"123456789"),
            "e3069283"
        );
        // Leading zeros are kept: 8 digits always.
        assert_eq!(checksum_bytes(ChecksumAlg::Adler32, b""), "00000001");
        assert_eq!(checksum_bytes(ChecksumAlg::Crc32c, b""), "00000000");
    }

    #[test]
    fn parses_names() {
        assert_eq!(
            "sha256".parse::<ChecksumAlg>().unwrap(),
            ChecksumAlg::Sha256
        );
        assert_eq!(
            " ADLER32 ".parse::<ChecksumAlg>().unwrap(),
            ChecksumAlg::Adler32
        );
        let e = "whirlpool".parse::<ChecksumAlg>().unwrap_err();
        assert_eq!(e.reply_code(), 501);
        for a in ChecksumAlg::ALL {
            assert_eq!(a.name().parse::<ChecksumAlg>().unwrap(), a);
            assert_eq!(Checksummer::new(a).alg(), a);
        }
    }

    #[test]
    fn ranges_of_a_file() {
        let f = BytesFile::new(b"xxabcyy".to_vec());
        let sha_abc = checksum_bytes(ChecksumAlg::Sha256, b"abc");
        assert_eq!(
            checksum(&f, ChecksumAlg::Sha256, 2, Some(3)).unwrap(),
            sha_abc
        );
        assert_eq!(
            checksum(&f, ChecksumAlg::Md5, 0, None).unwrap(),
            checksum_bytes(ChecksumAlg::Md5, b"xxabcyy")
        );
        // Length past the end is clamped; offset == size is an empty range.
        assert_eq!(
            checksum(&f, ChecksumAlg::Crc32c, 5, Some(100)).unwrap(),
            checksum_bytes(ChecksumAlg::Crc32c, b"yy")
        );
        assert_eq!(
            checksum(&f, ChecksumAlg::Md5, 7, None).unwrap(),
            "d41d8cd98f00b204e9800998ecf8427e"
        );
        assert_eq!(
            checksum(&f, ChecksumAlg::Md5, 3, Some(0)).unwrap(),
            checksum_bytes(ChecksumAlg::Md5, b"")
        );
        let e = checksum(&f, ChecksumAlg::Md5, 8, None).unwrap_err();
        assert!(matches!(e, StorageError::Invalid(_)));
        assert_eq!(e.reply_code(), 501);
    }

    #[test]
    fn multi_chunk_matches_one_shot() {
        let data = drsftp_testkit::data::pattern(CHUNK * 2 + 12345, 31);
        let f = BytesFile::new(data.clone());
        for alg in ChecksumAlg::ALL {
            assert_eq!(
                checksum(&f, alg, 0, None).unwrap(),
                checksum_bytes(alg, &data),
                "{alg:?}"
            );
            assert_eq!(
                checksum(&f, alg, 100, Some(CHUNK as u64 + 7)).unwrap(),
                checksum_bytes(alg, &data[100..100 + CHUNK + 7]),
                "{alg:?}"
            );
        }
    }

    #[test]
    fn streaming_equals_one_shot() {
        let data = b"The quick brown fox jumps over the lazy dog";
        for alg in ChecksumAlg::ALL {
            let mut c = Checksummer::new(alg);
            for piece in data.chunks(5) {
                c.update(piece);
            }
            assert_eq!(c.finish(), checksum_bytes(alg, data));
        }
    }
}
