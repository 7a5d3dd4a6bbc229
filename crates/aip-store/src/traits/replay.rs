//! Replay protection (spec 22.3).

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// Durable claims on message ids, so a replayed message is detected on every node and after a
/// restart.
#[async_trait]
pub trait ReplayStore: Send + Sync + 'static {
    /// Durably claims a message id (or profile delivery id) within `scope` until `retain_until_ms`.
    async fn claim_message_id(
        &self,
        scope: &str,
        message_id: &str,
        now_ms: i64,
        retain_until_ms: i64,
    ) -> StoreResult<ReplayClaim>;
}
