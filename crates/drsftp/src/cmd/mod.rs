//! One module per drsftp subcommand; each exposes an `Args` (clap) struct and `run(args) -> anyhow::Result<()>`.
pub mod auto;
pub mod calibrate;
pub mod calibrate_loss;
pub mod client_config;
pub mod copy;
pub mod demo;
pub mod doctor;
pub mod lab;
pub mod ls;
pub mod passwd;
pub mod plot;
pub mod serve;
pub mod serve_config;
pub mod tls_arg;
pub mod tune;
pub(crate) mod units_arg;
