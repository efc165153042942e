//! Spawned tasks that end with their owner: [`AbortOnDrop`] holds a `JoinHandle` and aborts the task when the
//! holder goes away (an early return, a dropped future, a session that ends), so no listener, accept loop,
//! transfer or filesystem task outlives the client transfer or server session that started it.

use tokio::task::JoinHandle;

use crate::data::DataError;

/// Aborts the task, if any, when dropped.
#[derive(Debug)]
pub(crate) struct AbortOnDrop<T>(pub(crate) Option<JoinHandle<T>>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            t.abort();
        }
    }
}

impl<T: Send + 'static> AbortOnDrop<T> {
    /// Spawns `fut` on the current runtime, held.
    pub(crate) fn spawn(fut: impl std::future::Future<Output = T> + Send + 'static) -> Self {
        AbortOnDrop(Some(tokio::spawn(fut)))
    }
}

impl<T> AbortOnDrop<Result<T, DataError>> {
    /// The task's result (a panic or abort is `Incomplete`, naming `what`); pending forever while there is no
    /// task, so it can sit in a `select!` before the task is spawned.
    pub(crate) async fn join(&mut self, what: &str) -> Result<T, DataError> {
        match self.0.as_mut() {
            Some(t) => t
                .await
                .unwrap_or_else(|e| Err(DataError::Incomplete(format!("{what} task ended: {e}")))),
            None => std::future::pending().await,
        }
    }
}
