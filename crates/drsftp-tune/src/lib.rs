//! drsftp-tune: sans-IO Dynamic Right-Sizing (seeds 000/002/003), buffer policies and limit classification, and
//! the parallel-stream/buffer model of seed 001 with its online `-p auto` controller. No I/O, no clocks: every
//! entry point takes `now: Instant` and returns actions (`handle_*` / `poll_*`).

#![forbid(unsafe_code)]

pub mod auto;
pub mod drs;
pub mod fluid;
pub mod model;
pub mod policy;
pub mod probe;
pub mod sample;
pub mod start;
pub mod transport;

pub use auto::{AutoConfig, AutoStreams, PathSample, StreamAction};
pub use drs::{
    window_bounds, DrsAction, DrsConfig, DrsReceiver, DrsSender, RttSource, WindowBounds,
};
pub use model::{fit, saturation_point, Fit, FitPoint, Model, RecommendInput, Recommendation};
pub use policy::{BufferPolicy, Limit, LimitClassifier, LimitReport, ParseError};
pub use probe::{probe_first, BlastProbe, BlastReading, ProbeConfig, ProbeVerdict};
pub use sample::TcpSample;
pub use start::{auto_start, AutoStart, AutoStartInput, StartBuffer};
pub use transport::{
    blast_start_rate, start_choice, Decision, Judged, PathReading, ProfileLoss, StartChoice,
    TransportConfig, TransportDecider, MEMORY_START_SHARE, PROFILE_LOSSY, SWITCH_START_SHARE,
};
// The units grammar lives in drsftp-units; re-exported so code that imports it from here (the bench harnesses)
// keeps building. New code imports drsftp_units.
pub use drsftp_units::{format_size, parse_duration, parse_rate, parse_size};
