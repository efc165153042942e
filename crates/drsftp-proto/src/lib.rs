//! drsftp-proto: (skeleton, to be filled).
pub mod client;
