//! [`HousekeepingStore`] in SQL: the backend's name, a round trip, and purging what expired.

use async_trait::async_trait;

use super::{Dialect, SqlStore};
use crate::db::{Tx, query};
use crate::error::{StoreError, StoreResult};
use crate::model::{
    ActionState, Backend, ChainTombstone, DueEvidence, EvidenceCutoffs, EvidencePurge,
    EvidencePurged, HistoryPurge, PurgeReport, RetentionCutoffs,
};
use crate::traits::HousekeepingStore;

#[async_trait]
impl<D: Dialect> HousekeepingStore for SqlStore<D> {
    fn backend(&self) -> Backend {
        D::BACKEND
    }

    async fn close(&self) {
        self.dialect().close().await;
    }

    async fn ping(&self) -> StoreResult<()> {
        query("SELECT 1").execute(self.reader()).await?;
        // Through the writer, so a stalled writer stalls the probe (its caller bounds the wait).
        let applied: Vec<(i64, String)> = self
            .write(false, |tx| Box::pin(super::setup::applied_migrations(tx)))
            .await?;
        match crate::migrate::pending(&applied, D::MIGRATIONS)?.first() {
            Some(m) => Err(StoreError::MigrationPending { version: m.version }),
            None => Ok(()),
        }
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

    async fn purge_history(&self, cutoffs: RetentionCutoffs) -> StoreResult<HistoryPurge> {
        self.write(false, move |tx| {
            Box::pin(async move {
                let mut purged = HistoryPurge::default();
                if let Some(before) = cutoffs.events_before_ms {
                    // A prefix of the listing order: everything up to the last position of an
                    // event older than the cutoff.
                    let row = query(
                        "SELECT MAX(pos) AS horizon FROM aip_events WHERE occurred_at_ms < $1 AND pos IS NOT NULL",
                    )
                    .bind(before)
                    .fetch_one(&mut *tx)
                    .await?;
                    if let Some(horizon) = row.try_get::<Option<i64>>("horizon")? {
                        purged.events = query("DELETE FROM aip_events WHERE pos <= $1")
                            .bind(horizon)
                            .execute(&mut *tx)
                            .await?;
                        raise_mark(&mut *tx, EVENTS_PURGED_THROUGH, horizon).await?;
                    }
                }
                if let Some(before) = cutoffs.chunks_before_ms {
                    let ended = ended_states();
                    purged.chunks = query(format!(
                        "DELETE FROM aip_chunks WHERE EXISTS (SELECT 1 FROM aip_actions a \
                         WHERE a.tenant = aip_chunks.tenant AND a.action_id = aip_chunks.action_id \
                         AND a.state IN ({ended}) AND a.updated_at_ms < $1)"
                    ))
                    .bind(before)
                    .execute(&mut *tx)
                    .await?;
                    raise_mark(&mut *tx, CHUNKS_PURGED_BEFORE, before).await?;
                }
                Ok(purged)
            })
        })
        .await
    }

    async fn due_evidence(&self, cutoffs: EvidenceCutoffs) -> StoreResult<DueEvidence> {
        super::evidence::due(self, cutoffs).await
    }

    async fn purge_evidence(&self, purge: EvidencePurge) -> StoreResult<EvidencePurged> {
        super::evidence::purge(self, purge).await
    }

    async fn chain_tombstone(
        &self,
        tenant: &str,
        chain_id: &str,
    ) -> StoreResult<Option<ChainTombstone>> {
        super::evidence::tombstone(self, tenant, chain_id).await
    }
}

/// `aip_meta` mark: the last event position purged.
pub(super) const EVENTS_PURGED_THROUGH: &str = "events_purged_through";
/// `aip_meta` mark: chunks of actions that ended before this time (epoch ms) may be purged.
pub(super) const CHUNKS_PURGED_BEFORE: &str = "chunks_purged_before_ms";

/// The terminal action states as SQL literals (constants, never input).
pub(super) fn ended_states() -> String {
    ActionState::ALL
        .iter()
        .filter(|s| s.is_terminal())
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Raises an `aip_meta` mark to `value` (never lowers it).
pub(super) async fn raise_mark(tx: &mut dyn Tx, name: &str, value: i64) -> StoreResult<()> {
    let current = mark_in(&mut *tx, name).await?;
    if current.is_some_and(|c| c >= value) {
        return Ok(());
    }
    query("INSERT INTO aip_meta (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value")
        .bind(name)
        .bind(value.to_string())
        .execute(&mut *tx)
        .await?;
    Ok(())
}

async fn mark_in(tx: &mut dyn Tx, name: &str) -> StoreResult<Option<i64>> {
    let row = query("SELECT value FROM aip_meta WHERE name = $1")
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?;
    parse_mark(name, row)
}

/// An `aip_meta` mark as committed (for reads).
pub(super) async fn mark<D: Dialect>(store: &SqlStore<D>, name: &str) -> StoreResult<Option<i64>> {
    let row = query("SELECT value FROM aip_meta WHERE name = $1")
        .bind(name)
        .fetch_optional(store.reader())
        .await?;
    parse_mark(name, row)
}

fn parse_mark(name: &str, row: Option<crate::db::Row>) -> StoreResult<Option<i64>> {
    row.map(|r| {
        let text: String = r.try_get("value")?;
        text.parse()
            .map_err(|_| StoreError::Corrupt(format!("aip_meta {name}: {text}")))
    })
    .transpose()
}
