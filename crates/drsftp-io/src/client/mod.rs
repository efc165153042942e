//! GridFTP client driver: control connection, data channel set-up, transfers for `drsftp copy` and `drsftp ls`.
