//! The C allocator's large-allocation policy: glibc's adaptive mmap threshold, pinned for long-running servers.
//!
//! glibc serves an allocation of at least `M_MMAP_THRESHOLD` bytes with its own `mmap`, returned to the kernel on
//! free. By default the threshold adapts: freeing such a chunk raises the threshold to the chunk's size (up to
//! 32 MiB), so from then on allocations that size come from the malloc arenas, and freed arena memory is only
//! given back when it sits at the top of a heap. In `drsftp serve` each login's argon2id verification allocates
//! ~19 MiB on whichever blocking-pool thread runs it (each thread may have its own arena): after the first login
//! every later one left up to 19 MiB resident in some arena, and so did freed block buffers, so the server's RSS
//! grew with every session (docs/bench/loopback.md). Setting the threshold explicitly turns the adaptation off.

/// The threshold [`pin_mmap_threshold`] sets: glibc's own initial value. Allocations this large or larger (block
/// buffers, argon2 memory, read-ahead buffers) are mapped on their own and unmapped when freed; they are made once
/// per connection or login, so the extra `mmap`/`munmap` costs nothing measurable.
pub const MMAP_THRESHOLD: usize = 128 << 10;

/// Pins glibc's mmap threshold at [`MMAP_THRESHOLD`] (which also stops its adaptation of the trim threshold), so
/// memory freed by large allocations goes back to the kernel. Returns false when the allocator refused, and on
/// other C libraries, where it does nothing.
pub fn pin_mmap_threshold() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt takes two integers and changes only the allocator's tunables; it is thread-safe.
        unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD as libc::c_int) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    /// A large buffer allocated and freed after pinning is returned to the kernel: allocating and freeing many
    /// buffers just above the old adaptive threshold does not leave them resident.
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn freed_large_buffers_leave_no_resident_memory() {
        fn rss_kib() -> u64 {
            let s = std::fs::read_to_string("/proc/self/status").unwrap();
            let l = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
            l.split_whitespace().nth(1).unwrap().parse().unwrap()
        }
        assert!(super::pin_mmap_threshold());
        // Without the pin, freeing the first chunk raises the threshold to its size, the next ones come from an
        // arena, and the small allocations made between them keep the freed chunks from the heap's top, so
        // nothing is trimmed (the unpinned server grew ~19 MiB per login this way).
        drop(std::hint::black_box(vec![1u8; 16 << 20]));
        let before = rss_kib();
        let mut big = vec![];
        let mut small = vec![];
        for i in 0..4u8 {
            big.push(std::hint::black_box(vec![i + 1; 16 << 20]));
            small.push(std::hint::black_box(vec![i; 64]));
        }
        assert!(rss_kib() >= before + (48 << 10), "the buffers were touched");
        drop(big);
        let after = rss_kib();
        assert!(
            after < before + (16 << 10),
            "RSS {before} KiB before, {after} KiB after freeing 64 MiB"
        );
        drop(small);
    }
}
