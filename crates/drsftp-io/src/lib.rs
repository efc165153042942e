//! drsftp-io: (skeleton, to be filled).
