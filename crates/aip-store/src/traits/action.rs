//! Actions and their idempotency reservations (spec 9.5, 11.3, 11.5).

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// Admission, lookup, listing and compare-and-set transitions of actions, with the idempotency
/// reservations admission takes.
#[async_trait]
pub trait ActionStore: Send + Sync + 'static {
    /// Durable admission in one transaction: idempotency reservation, action row, receipts, events
    /// and the queue entry. A duplicate key resolves per its [`CollisionBehavior`] without writing.
    async fn admit(&self, admission: Admission) -> StoreResult<AdmissionOutcome>;

    /// One action of `tenant` by id (the caller authorizes the reader against its principal).
    /// Action ids are unique per tenant: another tenant's action of the same id is never returned.
    async fn get_action(&self, tenant: &str, action_id: &str) -> StoreResult<Option<ActionRecord>>;

    /// Actions visible under `query`, oldest first, after `cursor`.
    async fn list_actions(
        &self,
        query: &ActionQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<ActionRecord>>;

    /// How many non-terminal actions match `query` (its `state` filter is ignored): a session's
    /// `active_action_count` (spec 10.4), counted under the reader's scope like a list.
    async fn count_active_actions(&self, query: &ActionQuery) -> StoreResult<u64>;

    /// The non-terminal actions matching `query` (its `state` filter is ignored) counted by state
    /// and mode, under the reader's scope like a list: what a session is doing (spec 10.3).
    async fn active_actions_by_state(&self, query: &ActionQuery)
    -> StoreResult<Vec<ActiveActions>>;

    /// Compare-and-set transition with its result, events and receipts in one transaction.
    /// Terminal states are final ([`crate::StoreError::Terminal`]); a mismatched current state is
    /// [`crate::StoreError::StateConflict`]; a fenced write from a stale lease is
    /// [`crate::StoreError::StaleLease`].
    async fn transition_action(&self, transition: Transition) -> StoreResult<ActionRecord>;

    /// The live reservation of `(scope, key)`, if any.
    async fn get_idempotency(
        &self,
        scope: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<IdempotencyRecord>>;

    /// Non-terminal actions admitted at or before `admitted_before_ms` that no job can still finish
    /// (no job; or its job is done, dead, or leased with attempts exhausted and the lease expired at
    /// `now_ms`): work a crash left unfinished. Jobs with a live or claimable lease are excluded.
    async fn list_unfinished_actions(
        &self,
        now_ms: i64,
        admitted_before_ms: i64,
        limit: Limit,
    ) -> StoreResult<Vec<ActionRecord>>;
}
