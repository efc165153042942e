//! Cross-cutting dialogue tests of the server session (pipelining, framing errors, markers, timeouts).
