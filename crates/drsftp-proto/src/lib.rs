//! drsftp-proto: (skeleton, to be filled).
