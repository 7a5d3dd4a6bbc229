//! The operational read model (spec 16, 18): every read authorizes the authenticated reader first;
//! objects of other readers answer "not found" exactly like missing ones, and lists never count
//! them. Each read takes its wire request type, so the envelope path and the REST routes of the
//! bindings run the same code.

mod actions;
mod audit;
mod events;
mod receipts;
pub(crate) mod views;

use std::time::{Duration, Instant};

use aip_store::{ActionRecord, Limit};

use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::runtime::Runtime;

/// How often a bounded wait re-reads even without a change signal (a change on another node may
/// not be signalled here).
const WAIT_POLL: Duration = Duration::from_millis(250);

impl Runtime {
    /// The action if `caller` may read it; otherwise `NotFound`, exactly as for a missing id.
    pub(crate) async fn visible_action(
        &self,
        caller: &Caller,
        action_id: &str,
    ) -> Result<ActionRecord, RuntimeError> {
        match self.store().get_action(&caller.tenant, action_id).await? {
            Some(record) if caller.may_read(&record.tenant, &record.principal) => Ok(record),
            _ => Err(RuntimeError::NotFound("action")),
        }
    }

    /// Waits (bounded) until the action is terminal, re-reading it after each committed change.
    pub(crate) async fn wait_terminal(
        &self,
        caller: &Caller,
        mut record: ActionRecord,
        wait_ms: u64,
    ) -> Result<ActionRecord, RuntimeError> {
        let deadline =
            Instant::now() + Duration::from_millis(wait_ms.min(self.config().max_wait_ms));
        let mut watch = self.store().watch_changes();
        while !record.state.is_terminal() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            watch.mark_seen();
            record = self.visible_action(caller, &record.action_id).await?;
            if record.state.is_terminal() {
                break;
            }
            watch.changed_within(left.min(WAIT_POLL)).await;
        }
        Ok(record)
    }

    /// A requested wait, checked against the bound (spec 16.4).
    pub(crate) fn check_wait(&self, wait_ms: Option<u64>) -> Result<u64, RuntimeError> {
        match wait_ms {
            Some(w) if w > self.config().max_wait_ms => Err(RuntimeError::InvalidQuery(
                "wait_ms is above the configured maximum (at most 30000)",
            )),
            Some(w) => Ok(w),
            None => Ok(0),
        }
    }

    /// A requested page size, checked against the bounds (spec 16.4).
    pub(crate) fn limit(&self, limit: Option<u32>) -> Result<Limit, RuntimeError> {
        let n = limit.unwrap_or(self.config().default_list_limit);
        if n == 0 || n > self.config().max_list_limit {
            return Err(RuntimeError::InvalidQuery(
                "limit must be between 1 and the configured maximum (at most 1000)",
            ));
        }
        Limit::new(n).map_err(|_| RuntimeError::InvalidQuery("limit must be between 1 and 1000"))
    }

    /// A request's tenant selector (spec 22.6): absent, or the caller's own tenant. Naming another
    /// tenant is refused; it never widens what the caller sees.
    pub(crate) fn check_tenant(
        &self,
        caller: &Caller,
        tenant_id: Option<&str>,
    ) -> Result<(), RuntimeError> {
        match tenant_id {
            Some(tenant) if tenant != caller.tenant => Err(RuntimeError::ForeignTenant),
            _ => Ok(()),
        }
    }

    /// The principal a list is bounded to: the caller itself, unless it reads its whole tenant (then
    /// the optional filter). `Err(())` when the filter names a principal the caller may not read,
    /// which matches nothing.
    pub(crate) fn reader_bound(
        &self,
        caller: &Caller,
        principal_filter: Option<&str>,
    ) -> Result<Option<String>, ()> {
        match (caller.reads_whole_tenant(), principal_filter) {
            (true, filter) => Ok(filter.map(str::to_owned)),
            (false, None) => Ok(Some(caller.id.clone())),
            (false, Some(p)) if p == caller.id => Ok(Some(caller.id.clone())),
            (false, Some(_)) => Err(()),
        }
    }
}
