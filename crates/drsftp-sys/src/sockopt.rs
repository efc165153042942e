//! Socket options: send/receive buffer sizes, window scaling set-up, congestion control selection.
