//! Property tests: random bytes, command lines and driver answers never panic the session and every reply is well-formed.
