//! GridFTP server driver: listener, one task per control session, executing drsftp-proto server actions.
