//! The operational read model (spec 16, 18): every read authorizes the authenticated reader first;
//! objects of other readers answer "not found" and lists never count them.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aip_core::{
    ActionEvents, ActionId, ActionLifecycleState, ActionList, ActionResult, ActionStatus,
    AuditEvent, AuditQueryResult, CapabilityId, CorrelationId, Event, EventId, EventStream,
    Principal, PrincipalKind, Receipt, ReceiptChain, SessionId, Timestamp,
};
use aip_store::{
    ActionQuery, ActionRecord, ActionState, AuditQuery, EventQuery, EventRecord, Limit,
    ReceiptRecord,
};
use serde_json::Value;

use crate::caller::Caller;
use crate::engine::{Runtime, stored_result};
use crate::error::RuntimeError;

/// Filters of an action list; visibility comes from the reader, never from these.
#[derive(Debug, Clone, Default)]
pub struct ActionListQuery {
    /// Only this lifecycle state.
    pub state: Option<String>,
    /// Only this capability.
    pub capability_id: Option<String>,
    /// Only this session.
    pub session_id: Option<String>,
    /// Continue after this opaque cursor.
    pub cursor: Option<String>,
    /// Page size (1..=1000).
    pub limit: Option<u32>,
    /// Embed final results.
    pub include_results: bool,
}

impl Runtime {
    /// The action if `caller` may read it; otherwise `NotFound`, exactly as for a missing id.
    pub(crate) async fn visible_action(
        &self,
        caller: &Caller,
        action_id: &str,
    ) -> Result<ActionRecord, RuntimeError> {
        match self.store.get_action(action_id).await? {
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
        let deadline = Instant::now() + Duration::from_millis(wait_ms.min(self.config.max_wait_ms));
        let mut watch = self.store.watch_changes();
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
            // Poll at least every 250 ms in case a change on another node is not signalled here.
            watch
                .changed_within(left.min(Duration::from_millis(250)))
                .await;
        }
        Ok(record)
    }

    fn check_wait(&self, wait_ms: Option<u64>) -> Result<u64, RuntimeError> {
        match wait_ms {
            Some(w) if w > self.config.max_wait_ms => Err(RuntimeError::InvalidQuery(
                "wait_ms is above the configured maximum (at most 30000)",
            )),
            Some(w) => Ok(w),
            None => Ok(0),
        }
    }

    pub(crate) fn limit(&self, limit: Option<u32>) -> Result<Limit, RuntimeError> {
        let n = limit.unwrap_or(self.config.default_list_limit);
        if n == 0 || n > self.config.max_list_limit {
            return Err(RuntimeError::InvalidQuery(
                "limit must be between 1 and the configured maximum (at most 1000)",
            ));
        }
        Limit::new(n).map_err(|_| RuntimeError::InvalidQuery("limit must be between 1 and 1000"))
    }

    /// Action status (spec 16.5), optionally waiting up to `wait_ms` for a terminal state.
    pub async fn action_status(
        &self,
        caller: &Caller,
        action_id: &str,
        include_result: bool,
        include_receipts: bool,
        wait_ms: Option<u64>,
    ) -> Result<ActionStatus, RuntimeError> {
        let wait = self.check_wait(wait_ms)?;
        let mut record = self.visible_action(caller, action_id).await?;
        if wait > 0 {
            record = self.wait_terminal(caller, record, wait).await?;
        }
        let chain = if include_receipts {
            Some(self.chain_of(&record.action_id).await?)
        } else {
            None
        };
        Ok(status_view(&record, include_result, chain))
    }

    /// The final result; `NotFound` while it does not exist yet (after an optional bounded wait).
    pub async fn action_result(
        &self,
        caller: &Caller,
        action_id: &str,
        wait_ms: Option<u64>,
    ) -> Result<ActionResult, RuntimeError> {
        let wait = self.check_wait(wait_ms)?;
        let mut record = self.visible_action(caller, action_id).await?;
        if wait > 0 {
            record = self.wait_terminal(caller, record, wait).await?;
        }
        if !record.state.is_terminal() {
            return Err(RuntimeError::NotFound("final result"));
        }
        stored_result(&record).ok_or(RuntimeError::NotFound("final result"))
    }

    /// Actions visible to `caller` (spec 16.3-16.4).
    pub async fn list_actions(
        &self,
        caller: &Caller,
        query: &ActionListQuery,
    ) -> Result<ActionList, RuntimeError> {
        let limit = self.limit(query.limit)?;
        let state = match &query.state {
            Some(s) => Some(
                ActionState::parse(s).ok_or(RuntimeError::InvalidQuery("unknown action state"))?,
            ),
            None => None,
        };
        let store_query = ActionQuery {
            tenant: caller.tenant.clone(),
            principal: (!caller.reads_whole_tenant()).then(|| caller.id.clone()),
            session_id: query.session_id.clone(),
            state,
            capability: query.capability_id.clone(),
        };
        let page = self
            .store
            .list_actions(&store_query, query.cursor.as_deref(), limit)
            .await?;
        let actions: Vec<ActionStatus> = page
            .items
            .iter()
            .map(|r| status_view(r, query.include_results, None))
            .collect();
        // `total_size` counts only what this page shows: hidden objects are never counted (spec 16.3).
        Ok(ActionList {
            total_size: actions.len() as u64,
            actions,
            cursor: Some(page.next_cursor),
        })
    }

    /// One action's events (spec 16.5), after an opaque cursor, optionally waiting for new ones.
    pub async fn action_events(
        &self,
        caller: &Caller,
        action_id: &str,
        cursor: Option<&str>,
        limit: Option<u32>,
        wait_ms: Option<u64>,
    ) -> Result<ActionEvents, RuntimeError> {
        let record = self.visible_action(caller, action_id).await?;
        let query = EventQuery {
            tenant: caller.tenant.clone(),
            principal: (!caller.reads_whole_tenant()).then(|| caller.id.clone()),
            action_id: Some(record.action_id.clone()),
            session_id: None,
        };
        let (events, next) = self.events_page(&query, cursor, limit, wait_ms).await?;
        let record = self.visible_action(caller, action_id).await?;
        Ok(ActionEvents {
            action_id: ActionId::new(record.action_id.clone()),
            events,
            chunks: Vec::new(),
            cursor: Some(next),
            terminal: record.state.is_terminal(),
        })
    }

    /// The reader's global event feed (spec 16.1-16.2).
    pub async fn events(
        &self,
        caller: &Caller,
        cursor: Option<&str>,
        limit: Option<u32>,
        wait_ms: Option<u64>,
    ) -> Result<EventStream, RuntimeError> {
        let query = EventQuery {
            tenant: caller.tenant.clone(),
            principal: (!caller.reads_whole_tenant()).then(|| caller.id.clone()),
            action_id: None,
            session_id: None,
        };
        let (events, next) = self.events_page(&query, cursor, limit, wait_ms).await?;
        Ok(EventStream {
            events,
            next_cursor: Some(next),
        })
    }

    async fn events_page(
        &self,
        query: &EventQuery,
        cursor: Option<&str>,
        limit: Option<u32>,
        wait_ms: Option<u64>,
    ) -> Result<(Vec<Event>, String), RuntimeError> {
        let limit = self.limit(limit)?;
        let wait = self.check_wait(wait_ms)?;
        let deadline = Instant::now() + Duration::from_millis(wait);
        let mut watch = self.store.watch_changes();
        loop {
            watch.mark_seen();
            let page = self.store.list_events(query, cursor, limit).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if !page.items.is_empty() || left.is_zero() {
                return Ok((
                    page.items.iter().map(event_view).collect(),
                    page.next_cursor,
                ));
            }
            watch
                .changed_within(left.min(Duration::from_millis(250)))
                .await;
        }
    }

    /// A receipt chain with its root hash (spec 18.2); chains are per action and share its visibility.
    pub async fn receipt_chain(
        &self,
        caller: &Caller,
        chain_id: &str,
    ) -> Result<ReceiptChain, RuntimeError> {
        let records = self.store.list_receipts(chain_id, Limit::max()).await?;
        match records.first() {
            Some(first)
                if caller.may_read(
                    &first.tenant,
                    first.principal.as_deref().unwrap_or_default(),
                ) =>
            {
                Ok(chain_view(chain_id, &records))
            }
            _ => Err(RuntimeError::NotFound("receipt chain")),
        }
    }

    /// The chain that holds one receipt.
    pub async fn receipt_chain_by_receipt(
        &self,
        caller: &Caller,
        receipt_id: &str,
    ) -> Result<ReceiptChain, RuntimeError> {
        let record = self
            .store
            .get_receipt(receipt_id)
            .await?
            .ok_or(RuntimeError::NotFound("receipt"))?;
        if !caller.may_read(
            &record.tenant,
            record.principal.as_deref().unwrap_or_default(),
        ) {
            return Err(RuntimeError::NotFound("receipt"));
        }
        self.receipt_chain(caller, &record.chain_id).await
    }

    async fn chain_of(&self, chain_id: &str) -> Result<ReceiptChain, RuntimeError> {
        Ok(chain_view(
            chain_id,
            &self.store.list_receipts(chain_id, Limit::max()).await?,
        ))
    }

    /// Audit browsing (spec 18.3): needs `audit:read`; scoped to the reader's tenant.
    pub async fn audit(
        &self,
        caller: &Caller,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> Result<AuditQueryResult, RuntimeError> {
        if !caller.may_read_audit() {
            return Err(RuntimeError::NotFound("audit events"));
        }
        let limit = self.limit(limit)?;
        let page = self
            .store
            .list_audit(
                &AuditQuery {
                    tenant: caller.tenant.clone(),
                    actor: None,
                },
                cursor,
                limit,
            )
            .await?;
        let events = page
            .items
            .iter()
            .map(|a| AuditEvent {
                id: a.audit_id.clone(),
                actor: principal(&a.actor),
                identity: None,
                action: a.action_label.clone(),
                occurred_at: ts(a.occurred_at_ms),
                data: Some(a.data.clone()),
            })
            .collect();
        Ok(AuditQueryResult {
            events,
            receipt_chains: Vec::new(),
            cursor: Some(page.next_cursor),
        })
    }
}

fn chain_view(chain_id: &str, records: &[ReceiptRecord]) -> ReceiptChain {
    let receipts: Vec<Receipt> = records
        .iter()
        .filter_map(|r| serde_json::from_value(r.body.clone()).ok())
        .collect();
    let root_hash = (!records.is_empty())
        .then(|| aip_core::receipts::root_hash(records.iter().map(|r| r.hash.as_str())));
    ReceiptChain {
        chain_id: chain_id.to_owned(),
        receipts,
        root_hash,
    }
}

fn status_view(
    record: &ActionRecord,
    include_result: bool,
    receipt_chain: Option<ReceiptChain>,
) -> ActionStatus {
    let state: ActionLifecycleState =
        serde_json::from_value(Value::String(record.state.as_str().to_owned()))
            .unwrap_or(ActionLifecycleState::Unknown);
    let result = stored_result(record);
    let mut links = BTreeMap::new();
    links.insert(
        "self".to_owned(),
        format!("/aip/v1/actions/{}", record.action_id),
    );
    links.insert(
        "events".to_owned(),
        format!("/aip/v1/actions/{}/events", record.action_id),
    );
    links.insert(
        "receipts".to_owned(),
        format!("/aip/v1/receipts/{}", record.action_id),
    );
    ActionStatus {
        action_id: ActionId::new(record.action_id.clone()),
        capability_id: Some(CapabilityId::new(record.capability.clone())),
        session_id: record.session_id.clone().map(SessionId::new),
        correlation_id: record.correlation_id.clone().map(CorrelationId::new),
        state,
        queued_state: None,
        result_status: result.as_ref().map(|r| r.status),
        approval_id: None,
        transaction_id: None,
        delegation_id: None,
        started_at: Some(ts(record.created_at_ms)),
        updated_at: ts(record.updated_at_ms),
        completed_at: record.state.is_terminal().then(|| ts(record.updated_at_ms)),
        retry: None,
        lease: None,
        result: if include_result { result } else { None },
        receipt_chain,
        chunks: Vec::new(),
        links,
    }
}

/// The wire form of a stored event.
pub(crate) fn event_view(e: &EventRecord) -> Event {
    Event {
        id: EventId::new(e.event_id.clone()),
        kind: e.kind.clone(),
        occurred_at: ts(e.occurred_at_ms),
        session_id: e.session_id.clone().map(SessionId::new),
        action_id: e.action_id.clone().map(ActionId::new),
        correlation_id: e.correlation_id.clone().map(CorrelationId::new),
        actor: e.principal.as_deref().map(principal),
        data: Some(e.data.clone()),
    }
}

fn principal(id: &str) -> Principal {
    crate::engine::bare_principal(id, PrincipalKind::Service)
}

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(ms).unwrap_or_else(Timestamp::now)
}
