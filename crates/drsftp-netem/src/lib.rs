//! drsftp-netem: (skeleton, to be filled).
