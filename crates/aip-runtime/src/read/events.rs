//! Event reads (spec 16.1-16.2, 16.5): one action's events, and the reader's whole feed, after an
//! opaque cursor, optionally waiting (bounded) for the next event.

use std::time::{Duration, Instant};

use aip_core::{
    ActionEvents, ActionEventsRequest, ActionId, Event, EventStream, EventStreamRequest,
};
use aip_store::EventQuery;

use crate::caller::Caller;
use crate::error::RuntimeError;
use crate::read::{WAIT_POLL, views};
use crate::runtime::Runtime;

impl Runtime {
    /// `action_events_request`: the action's events after the cursor (spec 16.5), only of `kinds`
    /// when given, waiting up to `wait_ms` for one when there is none yet. The first page carries
    /// the first chunks when asked (`/chunks` pages the rest).
    pub async fn read_action_events(
        &self,
        caller: &Caller,
        request: &ActionEventsRequest,
        wait_ms: Option<u64>,
    ) -> Result<ActionEvents, RuntimeError> {
        self.check_tenant(caller, request.tenant_id.as_deref())?;
        let action_id = request.action_id.as_str();
        let record = self.visible_action(caller, action_id).await?;
        let query = reader_events(caller, Some(record.action_id.clone()), &request.kinds)?;
        let (events, next) = self
            .events_page(&query, request.cursor.as_deref(), request.limit, wait_ms)
            .await?;
        // Read again: the terminal flag must not predate the events returned.
        let record = self.visible_action(caller, action_id).await?;
        let chunks = if request.include_chunks && request.cursor.is_none() {
            self.first_chunks(caller, action_id, request.limit).await?
        } else {
            Vec::new()
        };
        Ok(ActionEvents {
            action_id: ActionId::new(record.action_id.clone()),
            events,
            chunks,
            cursor: Some(next),
            terminal: record.state.is_terminal(),
        })
    }

    /// `event_stream_request`: the reader's global event feed (spec 16.1-16.2), only of `kinds` when
    /// given.
    pub async fn read_events(
        &self,
        caller: &Caller,
        request: &EventStreamRequest,
        wait_ms: Option<u64>,
    ) -> Result<EventStream, RuntimeError> {
        let query = reader_events(caller, None, &request.kinds)?;
        let (events, next) = self
            .events_page(&query, request.cursor.as_deref(), request.limit, wait_ms)
            .await?;
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
        let mut watch = self.store().watch_changes();
        loop {
            watch.mark_seen();
            let page = self.store().list_events(query, cursor, limit).await?;
            let left = deadline.saturating_duration_since(Instant::now());
            if !page.items.is_empty() || left.is_zero() {
                return Ok((views::events(&page.items)?, page.next_cursor));
            }
            watch.changed_within(left.min(WAIT_POLL)).await;
        }
    }
}

/// The events `caller` may read, of one action or all, only of `kinds` (bounded) when given.
fn reader_events(
    caller: &Caller,
    action_id: Option<String>,
    kinds: &[String],
) -> Result<EventQuery, RuntimeError> {
    if kinds.len() > EventQuery::MAX_KINDS || kinds.iter().any(|k| k.is_empty() || k.len() > 128) {
        return Err(RuntimeError::InvalidQuery(
            "kinds: at most 32 non-empty kinds of at most 128 bytes",
        ));
    }
    Ok(EventQuery {
        tenant: caller.tenant.clone(),
        principal: (!caller.reads_whole_tenant()).then(|| caller.id.clone()),
        action_id,
        session_id: None,
        kinds: kinds.to_vec(),
    })
}
