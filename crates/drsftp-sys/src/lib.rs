//! drsftp-sys: (skeleton, to be filled).
