//! drsftp-tune: (skeleton, to be filled).
