//! drsftp-blast: (skeleton, to be filled).
