//! drsftp-storage: (skeleton, to be filled).
