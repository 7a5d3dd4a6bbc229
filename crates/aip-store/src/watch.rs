//! The change watch readers wait on instead of polling.

use std::time::Duration;

/// Wakes readers after committed changes (see [`crate::EventStore::watch_changes`]).
#[derive(Debug, Clone)]
pub struct ChangeWatch {
    rx: tokio::sync::watch::Receiver<u64>,
}

impl ChangeWatch {
    pub(crate) fn new(rx: tokio::sync::watch::Receiver<u64>) -> Self {
        ChangeWatch { rx }
    }

    /// Marks the current state as seen; call before the query whose emptiness you will wait on.
    pub fn mark_seen(&mut self) {
        self.rx.borrow_and_update();
    }

    /// Waits until something changed since the last [`ChangeWatch::mark_seen`] (or wait), at most
    /// `timeout`. Returns whether a change was seen. Bounded: never waits longer than `timeout`.
    pub async fn changed_within(&mut self, timeout: Duration) -> bool {
        matches!(
            tokio::time::timeout(timeout, self.rx.changed()).await,
            Ok(Ok(()))
        )
    }
}
