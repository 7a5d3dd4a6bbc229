//! [`HousekeepingStore`] in SQL: the backend's name, a round trip, and purging what expired.

use async_trait::async_trait;

use super::{Dialect, SqlStore};
use crate::db::query;
use crate::error::StoreResult;
use crate::model::{Backend, PurgeReport};
use crate::traits::HousekeepingStore;

#[async_trait]
impl<D: Dialect> HousekeepingStore for SqlStore<D> {
    fn backend(&self) -> Backend {
        D::BACKEND
    }

    async fn ping(&self) -> StoreResult<()> {
        query("SELECT 1").execute(self.reader()).await?;
        Ok(())
    }

    async fn purge_expired(&self, now_ms: i64) -> StoreResult<PurgeReport> {
        self.write(false, move |tx| {
            Box::pin(async move {
                let replay = query("DELETE FROM aip_replay_claims WHERE expires_at_ms <= $1")
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                let idem = query("DELETE FROM aip_idempotency WHERE expires_at_ms <= $1")
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await?;
                let tokens = query(
                    "DELETE FROM aip_resume_tokens WHERE expires_at_ms <= $1 OR consumed_at_ms IS NOT NULL",
                )
                .bind(now_ms)
                .execute(&mut *tx)
                .await?;
                Ok(PurgeReport {
                    replay_claims: replay,
                    idempotency_reservations: idem,
                    resume_tokens: tokens,
                })
            })
        })
        .await
    }
}
