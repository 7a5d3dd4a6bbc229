//! Escalations (spec 12.7): stored, listed, resolved once. Separate from approvals on purpose: no
//! escalation write touches an action or an approval.

use async_trait::async_trait;

use crate::error::StoreResult;
use crate::model::*;

/// Escalations and their resolutions.
#[async_trait]
pub trait EscalationStore: Send + Sync + 'static {
    /// Stores a new escalation and, in the same transaction, its expiry `timer`; an id already taken
    /// in the tenant writes nothing and returns the stored escalation.
    async fn create_escalation(
        &self,
        escalation: NewEscalation,
        timer: Option<NewJob>,
    ) -> StoreResult<EscalationCreated>;

    /// One escalation of `tenant` by id.
    async fn get_escalation(
        &self,
        tenant: &str,
        escalation_id: &str,
    ) -> StoreResult<Option<EscalationRecord>>;

    /// Escalations visible under `query`, oldest first, after `cursor`.
    async fn list_escalations(
        &self,
        query: &EscalationQuery,
        cursor: Option<&str>,
        limit: Limit,
    ) -> StoreResult<Page<EscalationRecord>>;

    /// Records the one resolution of an open escalation (compare-and-set on its version).
    async fn resolve_escalation(&self, resolve: EscalationResolve)
    -> StoreResult<EscalationRecord>;
}
