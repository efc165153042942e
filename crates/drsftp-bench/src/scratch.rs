//! What several harnesses share on the local machine: incompressible test files, a scratch directory removed
//! when dropped, a server process killed when dropped (also on failure), and the watch over a client process
//! (its final CPU time, both ends' memory) until it exits.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;

use anyhow::Result;

/// Writes `size` bytes of xorshift noise to `path`: fast to make, and nothing on the path can compress it.
pub(crate) fn make_file(path: &Path, size: u64) -> Result<()> {
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ size;
    let mut chunk = vec![0u8; 1 << 20];
    let mut left = size;
    while left > 0 {
        for w in chunk.chunks_exact_mut(8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            w.copy_from_slice(&x.to_le_bytes());
        }
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n])?;
        left -= n as u64;
    }
    f.flush()?;
    Ok(())
}

/// A scratch directory removed when dropped (it may hold several copies of a multi-GiB file).
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server process; killed (by its pid) and reaped when dropped.
pub(crate) struct Server(pub(crate) Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What [`watch_until_exit`] saw of one client run.
pub(crate) struct Watch {
    /// CPU seconds (user + system) of the client, read from its zombie entry before it is reaped.
    pub(crate) client_cpu: f64,
    /// Memory samples (KiB) of the client and of the server, every 20 ms.
    pub(crate) client_rss: Vec<u64>,
    pub(crate) server_rss: Vec<u64>,
}

/// Samples `client_rss` and `server_rss` every 20 ms until the process `pid` has exited (it is left for the
/// caller to reap); a sampler that returns `None` skips that sample.
pub(crate) fn watch_until_exit(
    pid: u32,
    client_rss: impl Fn() -> Option<u64>,
    server_rss: impl Fn() -> Option<u64>,
) -> Watch {
    let mut w = Watch {
        client_cpu: 0.0,
        client_rss: vec![],
        server_rss: vec![],
    };
    loop {
        // An exited client is a zombie until it is reaped and keeps its final CPU times: read them first.
        match crate::blast_aead::cpu(pid) {
            Some((t, 'Z' | 'X')) => {
                w.client_cpu = t;
                break;
            }
            Some((t, _)) => w.client_cpu = t,
            None => break,
        }
        w.client_rss.extend(client_rss());
        w.server_rss.extend(server_rss());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    w
}

#[cfg(test)]
mod tests {
    #[test]
    fn noise_files_have_their_size_and_do_not_repeat() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        super::make_file(&p, (3 << 20) + 5).unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(b.len(), (3 << 20) + 5);
        assert_ne!(b[..1 << 20], b[1 << 20..2 << 20], "each MiB differs");
    }
}
