//! Deterministic test data: pseudo-random bytes from a seed, a repeating byte pattern, random files (world-readable,
//! for peers that run as `nobody`) in open temporary directories, and SHA-256 in hex of bytes and files.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

/// A seeded xorshift64* generator of pseudo-random bytes: the same seed always gives the same bytes, and it is fast
/// enough for gigabytes.
#[derive(Debug, Clone)]
pub struct Random(u64);

impl Random {
    pub fn new(seed: u64) -> Random {
        Random(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next bytes, 8 a step: filling in pieces whose lengths are multiples of 8 gives the same bytes as one fill.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let x = &mut self.0;
            *x ^= *x >> 12;
            *x ^= *x << 25;
            *x ^= *x >> 27;
            let v = x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// Fills `buf` with the pseudo-random bytes of `seed` (see [`Random`]).
pub fn fill_random(buf: &mut [u8], seed: u64) {
    Random::new(seed).fill(buf);
}

/// `len` pseudo-random bytes from `seed` (see [`Random`]).
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill_random(&mut v, seed);
    v
}

/// `len` bytes of the pattern `i * step mod 251` (a prime, so the pattern does not line up with block sizes).
pub fn pattern(len: usize, step: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(step) % 251) as u8)
        .collect()
}

/// Writes `len` pseudo-random bytes from `seed` (see [`Random`]) to `path`, readable and writable by every
/// user; returns their SHA-256 (hex).
pub fn random_file(path: &Path, len: usize, seed: u64) -> String {
    let mut f =
        std::fs::File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    let mut h = Sha256::new();
    let mut rng = Random::new(seed);
    let mut buf = vec![0u8; 1 << 20];
    let mut left = len;
    while left > 0 {
        let n = left.min(buf.len());
        rng.fill(&mut buf[..n]);
        f.write_all(&buf[..n]).expect("write");
        h.update(&buf[..n]);
        left -= n;
    }
    chmod(path, 0o666);
    hex(&h.finalize())
}

/// SHA-256 (hex) of bytes.
pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// SHA-256 (hex) of a whole file.
pub fn sha256_file(path: &Path) -> String {
    sha256_file_range(path, 0, None)
}

/// SHA-256 (hex) of `len` bytes from `offset` (`None`: to the end) of a file.
pub fn sha256_file_range(path: &Path, offset: u64, len: Option<u64>) -> String {
    let mut f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    f.seek(SeekFrom::Start(offset)).expect("seek");
    let mut left = len.unwrap_or(u64::MAX);
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = f.read(&mut buf[..want]).expect("read");
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        left -= n as u64;
    }
    hex(&h.finalize())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Sets Unix permission bits.
pub fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|e| panic!("chmod {}: {e}", p.display()));
}

/// Sets `p`'s modification time to `secs` after the Unix epoch.
pub fn set_mtime(p: &Path, secs: u64) {
    std::fs::File::options()
        .write(true)
        .open(p)
        .and_then(|f| f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs)))
        .unwrap_or_else(|e| panic!("set mtime of {}: {e}", p.display()));
}

/// `p`'s modification time, whole seconds since the Unix epoch.
pub fn mtime(p: &Path) -> u64 {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("mtime of {}: {e}", p.display()))
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a modification time after 1970")
        .as_secs()
}

/// A temporary directory under /tmp that every user may read and write (Globus serves anonymous users as
/// `nobody`), its name starting with `prefix`; removed on drop.
pub fn open_tempdir(prefix: &str) -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in("/tmp")
        .expect("temp dir");
    chmod(d.path(), 0o777);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_bytes_are_deterministic_and_seeded() {
        assert_eq!(random_bytes(1000, 7), random_bytes(1000, 7));
        assert_ne!(random_bytes(1000, 7), random_bytes(1000, 8));
        // A shorter run is a prefix of a longer one.
        assert_eq!(random_bytes(13, 3)[..], random_bytes(64, 3)[..13]);
    }

    #[test]
    fn random_file_hash_matches_its_bytes() {
        let d = open_tempdir("drsftp-testkit-");
        let p = d.path().join("f.bin");
        let want = random_file(&p, (3 << 20) + 5, 9);
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(bytes, random_bytes((3 << 20) + 5, 9));
        assert_eq!(sha256(&bytes), want);
        assert_eq!(sha256_file(&p), want);
        assert_eq!(
            sha256_file_range(&p, 100, Some(5000)),
            sha256(&bytes[100..5100])
        );
        assert_eq!(sha256_file_range(&p, 100, None), sha256(&bytes[100..]));
    }

    #[test]
    fn pattern_repeats_every_251_bytes() {
        let p = pattern(600, 7);
        assert_eq!(p[..251], p[251..502]);
        assert_eq!(p[1], 7);
    }
}
