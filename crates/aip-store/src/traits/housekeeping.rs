//! Housekeeping: which backend, whether it answers, and removing what has expired.

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// What operating a store needs beyond its aggregates.
#[async_trait]
pub trait HousekeepingStore: Send + Sync + 'static {
    /// Which backend this is.
    fn backend(&self) -> Backend;

    /// Round-trips to the database through its readers and its writer, and checks that exactly the
    /// migrations this build knows are applied (for `/ready`).
    async fn ping(&self) -> StoreResult<()>;

    /// Commits the writes already queued and closes the connections: the last step of a clean
    /// shutdown (writes asked for afterwards fail as `Unavailable`).
    async fn close(&self);

    /// Removes expired replay claims, idempotency reservations and resume tokens.
    async fn purge_expired(&self, now_ms: i64) -> StoreResult<PurgeReport>;

    /// Removes history past retention: events by age (a prefix of the listing order, whose end is
    /// remembered so a cursor into it is [`crate::StoreError::CursorExpired`]), and the chunks of
    /// actions that ended before the cutoff (a chunk cursor of such an action is then expired too).
    /// Receipts and audit events are not touched (see [`Self::purge_evidence`]).
    async fn purge_history(&self, cutoffs: RetentionCutoffs) -> StoreResult<HistoryPurge>;

    /// Evidence past retention, for the runtime to archive: a prefix of the audit log and whole
    /// receipt chains of actions that ended before the cutoff (never a chain of a live action).
    async fn due_evidence(&self, cutoffs: EvidenceCutoffs) -> StoreResult<DueEvidence>;

    /// Removes archived evidence in one transaction: the audit prefix (remembered, so an audit
    /// cursor into it is [`crate::StoreError::CursorExpired`]) and each chain still ending at its
    /// archived head, leaving a [`ChainTombstone`]; appends the purge's own audit events. Receipts
    /// and audit events stay undeletable by anything else.
    async fn purge_evidence(&self, purge: EvidencePurge) -> StoreResult<EvidencePurged>;

    /// What is left of a purged receipt chain.
    async fn chain_tombstone(
        &self,
        tenant: &str,
        chain_id: &str,
    ) -> StoreResult<Option<ChainTombstone>>;
}
