//! Data channels shared by server and client: stream mode and MODE E send/receive over parallel TCP streams.
