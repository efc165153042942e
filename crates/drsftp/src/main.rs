//! drsftp command-line entry point (skeleton).
fn main() {}
