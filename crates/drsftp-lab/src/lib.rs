//! drsftp-lab: (skeleton, to be filled).
