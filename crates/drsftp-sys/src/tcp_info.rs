//! TCP_INFO: RTT, cwnd, delivery rate and receive space of a connected TCP socket (Linux).
