//! The process's open-file limit (RLIMIT_NOFILE): read it, and raise the soft limit towards the hard one, for
//! servers and tests that hold many connections.

use std::io;

/// The soft and hard open-file limits.
pub fn nofile() -> io::Result<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((r.rlim_cur, r.rlim_max))
}

/// Raises the soft open-file limit to `want` (at most the hard limit); returns the soft limit now in force.
pub fn raise_nofile(want: u64) -> io::Result<u64> {
    let (cur, max) = nofile()?;
    if cur >= want {
        return Ok(cur);
    }
    let r = libc::rlimit {
        rlim_cur: want.min(max),
        rlim_max: max,
    };
    // SAFETY: setrlimit reads one rlimit through a valid pointer.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(nofile()?.0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn raise_is_bounded_by_the_hard_limit() {
        let (cur, max) = super::nofile().unwrap();
        assert!(cur <= max);
        assert!(super::raise_nofile(cur).unwrap() >= cur);
    }
}
