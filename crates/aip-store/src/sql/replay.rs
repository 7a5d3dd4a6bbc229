//! [`ReplayStore`] in SQL: message-id claims (spec 22.3).

use async_trait::async_trait;

use super::{Dialect, SqlStore};
use crate::db::query;
use crate::error::{StoreError, StoreResult};
use crate::model::ReplayClaim;
use crate::traits::ReplayStore;

#[async_trait]
impl<D: Dialect> ReplayStore for SqlStore<D> {
    async fn claim_message_id(
        &self,
        scope: &str,
        message_id: &str,
        now_ms: i64,
        retain_until_ms: i64,
    ) -> StoreResult<ReplayClaim> {
        if retain_until_ms <= now_ms {
            return Err(StoreError::InvalidInput(
                "replay retention must end in the future",
            ));
        }
        let scope = scope.to_owned();
        let message_id = message_id.to_owned();
        self.write(false, move |tx| {
            Box::pin(async move {
                // Insert, or take over a lapsed claim; a live one is left untouched and the
                // statement returns nothing, so of concurrent claimers exactly one wins.
                let row = query(
                    "INSERT INTO aip_replay_claims (scope, message_id, claimed_at_ms, expires_at_ms) VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (scope, message_id) DO UPDATE SET claimed_at_ms = excluded.claimed_at_ms, expires_at_ms = excluded.expires_at_ms \
                     WHERE aip_replay_claims.expires_at_ms <= $3 RETURNING message_id",
                )
                .bind(scope)
                .bind(message_id)
                .bind(now_ms)
                .bind(retain_until_ms)
                .fetch_optional(&mut *tx)
                .await?;
                Ok(if row.is_some() {
                    ReplayClaim::Claimed
                } else {
                    ReplayClaim::Replayed
                })
            })
        })
        .await
    }
}
