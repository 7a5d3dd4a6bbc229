//! The operational read model (spec 16, 18): every read authorizes the authenticated reader first;
//! objects of other readers answer "not found" exactly like missing ones, and lists never count
//! them. Each read takes its wire request type, so the envelope path and the REST routes of the
//! bindings run the same code.

mod actions;
mod audit;
mod events;
mod receipts;
pub(crate) mod views;

pub(crate) use actions::withhold;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aip_store::{ActionRecord, Backend, Limit};
use tokio::sync::Notify;

use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::runtime::Runtime;

/// How often a bounded wait re-reads even without a change signal (a change on another node may
/// not be signalled here).
const WAIT_POLL: Duration = Duration::from_millis(250);

/// Wake-ups for bounded waits on one action, raised by this node when it moves that action. A
/// waiter re-reads only its own action when it moves, instead of on every commit of the store (with
/// many concurrent waiters every commit re-read every waited action). One entry per waited action,
/// removed when its last waiter leaves.
#[derive(Debug, Default)]
pub(crate) struct ActionWaiters {
    waiting: Mutex<HashMap<(String, String), Arc<Notify>>>,
}

impl ActionWaiters {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Arc<Notify>>> {
        // No code panics while holding the lock; a poisoned map is still consistent.
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A waiter's wake-up for one action; the entry goes when its last waiter is dropped, also
    /// when the waiting future is cancelled (a client that disconnects mid-wait).
    fn subscribe(&self, tenant: &str, action_id: &str) -> Waiter<'_> {
        let key = (tenant.to_owned(), action_id.to_owned());
        let notify = Arc::clone(self.lock().entry(key.clone()).or_default());
        Waiter {
            waiters: self,
            key,
            notify: Some(notify),
        }
    }

    /// How many actions have waiters (tests: entries do not outlive their waiters).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    /// Wakes the waiters of one action (after this node committed a change to it).
    pub(crate) fn wake(&self, tenant: &str, action_id: &str) {
        if let Some(notify) = self.lock().get(&(tenant.to_owned(), action_id.to_owned())) {
            notify.notify_waiters();
        }
    }
}

/// One waiter of an [`ActionWaiters`] entry.
struct Waiter<'a> {
    waiters: &'a ActionWaiters,
    key: (String, String),
    notify: Option<Arc<Notify>>,
}

impl Waiter<'_> {
    fn notify(&self) -> &Notify {
        // Set at creation and taken only in `drop`.
        self.notify.as_deref().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let mut waiting = self.waiters.lock();
        // Our reference goes under the lock, so two waiters leaving at once cannot both see the
        // other's reference and leave the entry behind.
        drop(self.notify.take());
        if waiting
            .get(&self.key)
            .is_some_and(|n| Arc::strong_count(n) == 1)
        {
            waiting.remove(&self.key);
        }
    }
}

impl Runtime {
    /// The stored action if `caller` may read it; otherwise `NotFound`, exactly as for a missing id
    /// (profiles project it, e.g. as an MCP task).
    pub async fn visible_action(
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
        // On SQLite this process is the only writer and wakes the waiter itself; on a shared
        // database another node may move the action, which only the store's change watch signals.
        let mut watch =
            (self.store().backend() != Backend::Sqlite).then(|| self.store().watch_changes());
        let (tenant, action_id) = (record.tenant.clone(), record.action_id.clone());
        let waiter = self.action_waiters().subscribe(&tenant, &action_id);
        let notify = waiter.notify();
        async {
            while !record.state.is_terminal() {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                let moved = notify.notified();
                tokio::pin!(moved);
                // Registered before the read, so a change committed after it is not missed.
                moved.as_mut().enable();
                if let Some(w) = watch.as_mut() {
                    w.mark_seen();
                }
                record = self.visible_action(caller, &action_id).await?;
                if record.state.is_terminal() {
                    break;
                }
                let poll = left.min(WAIT_POLL);
                match watch.as_mut() {
                    Some(w) => {
                        tokio::select! {
                            () = &mut moved => {}
                            _ = w.changed_within(poll) => {}
                        }
                    }
                    None => {
                        let _ = tokio::time::timeout(poll, &mut moved).await;
                    }
                }
            }
            Ok(record)
        }
        .await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_entry_goes_with_its_last_waiter_whichever_leaves_first() {
        let waiters = ActionWaiters::default();
        let first = waiters.subscribe("t", "x");
        let second = waiters.subscribe("t", "x");
        let other = waiters.subscribe("t", "y");
        assert_eq!(waiters.len(), 2);
        drop(first);
        assert_eq!(waiters.len(), 2);
        drop(second);
        assert_eq!(waiters.len(), 1);
        drop(other);
        assert_eq!(waiters.len(), 0);
    }

    #[test]
    fn waiters_leaving_at_once_on_many_threads_leave_no_entry_behind() {
        let waiters = ActionWaiters::default();
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..5_000 {
                        drop(waiters.subscribe("t", "x"));
                    }
                });
            }
        });
        assert_eq!(waiters.len(), 0);
    }

    #[tokio::test]
    async fn a_wait_cancelled_midway_leaves_no_entry_behind() {
        let waiters = ActionWaiters::default();
        let wait = async {
            let waiter = waiters.subscribe("t", "x");
            waiter.notify().notified().await;
        };
        let timed_out = tokio::time::timeout(Duration::from_millis(10), wait).await;
        assert!(timed_out.is_err());
        assert_eq!(waiters.len(), 0);
    }
}
