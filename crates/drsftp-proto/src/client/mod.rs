//! Sans-IO GridFTP client: the control-channel session that `drsftp copy`/`ls` drive (reply framing, FEAT,
//! 111/112/126 markers, PASV/EPSV/PORT/EPRT addressing, the command sequencing of a transfer, the DRS opt-in with
//! in-transfer `SBUF <id> <size>`, and the UDP blast channel's `OPTS BLAST`/`BPAS` set-up). It does not touch data
//! channels; it tells the driver when to listen or connect (see [`Event`]).
//!
//! ```text
//!   driver ──start(now, Op)──────────────▶ ClientSession ──poll_transmit()──▶ command bytes ──▶ server
//!   server ──reply bytes──handle_input(now)──▶            ──poll_event()────▶ Listen / Connect / TransferStarted /
//!   driver ──handle_listening / handle_data_ready──▶                          markers / Done / Failed
//!   driver ──handle_timeout(now) at poll_timeout()──▶
//! ```

mod addr;
mod answer;
mod batch;
#[cfg(test)]
mod batch_tests;
mod blast;
mod dispatch;
mod drs;
#[cfg(test)]
mod drs_tests;
mod feat;
#[cfg(test)]
mod login_tests;
mod markers;
mod pipeline;
#[cfg(test)]
mod pipeline_tests;
mod plan;
mod relay;
#[cfg(test)]
mod relay_tests;
mod reply;
#[cfg(test)]
mod script_tests;
mod session;
#[cfg(test)]
mod stripe_tests;
#[cfg(test)]
mod switch_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod third_party_tests;
#[cfg(test)]
mod tls_tests;
mod types;
mod upbatch;
#[cfg(test)]
mod upbatch_tests;

pub use addr::{parse_epsv, parse_pasv, parse_spas, port_command, spor_command, MAX_STRIPES};
/// Third-party blast set-up helpers (BPAS/BPRT lines, the 229/200/150 replies).
pub mod blast_setup {
    pub use super::blast::{
        bpas_line, bprt_line, offers_bprt, opts_line, parse_bpas_reply, parse_opts_mtu,
        parse_opts_reply, parse_start,
    };
}
pub use crate::ranges::parse_ranges;
pub use feat::{Features, VERIFY_PREFERENCE};
pub use markers::{parse_perf_marker, parse_range_marker, parse_stripe_counts, PerfMarker};
pub use relay::{Relay, RelayBreak, RelayResult};
pub use reply::{Reply, ReplyError, ReplyReader};
pub use session::ClientSession;

/// The password an anonymous login sends when the user gave none (RFC 1635 asks for an e-mail-like string).
pub const ANONYMOUS_PASSWORD: &str = "drsftp@";
pub use types::{
    BatchSpec, BlastChannel, BlastRequest, ClientConfig, ClientError, Direction, Event, ListKind,
    Op, Outcome, Partial, TransferMode, TransferReport, TransferSpec, Transport, UploadBatchSpec,
    UploadItem,
};
