//! Event reads (spec 16.1-16.2, 16.5): one action's events, and the reader's whole feed, after an
//! opaque cursor, optionally waiting (bounded) for the next event.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aip_core::DataSensitivity;
use aip_core::{
    ActionEvents, ActionEventsRequest, ActionId, Event, EventStream, EventStreamRequest,
};
use aip_store::EventQuery;
use serde_json::Value;

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
            .events_page(
                caller,
                &query,
                request.cursor.as_deref(),
                request.limit,
                wait_ms,
            )
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
            .events_page(
                caller,
                &query,
                request.cursor.as_deref(),
                request.limit,
                wait_ms,
            )
            .await?;
        Ok(EventStream {
            events,
            next_cursor: Some(next),
        })
    }

    async fn events_page(
        &self,
        caller: &Caller,
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
                let mut events = views::events(&page.items)?;
                self.withhold_event_outputs(caller, &mut events).await?;
                return Ok((events, page.next_cursor));
            }
            watch.changed_within(left.min(WAIT_POLL)).await;
        }
    }
}

impl Runtime {
    /// Removes the `output` an event carries of another principal's action whose output `caller`
    /// may not read (spec 9.6, 16.3), naming the sensitivity in `output_withheld` instead: events
    /// are read tenant-wide, so they must withhold what the action's own reads withhold.
    async fn withhold_event_outputs(
        &self,
        caller: &Caller,
        events: &mut [Event],
    ) -> Result<(), RuntimeError> {
        if caller.reads_sensitive_data() {
            return Ok(());
        }
        let mut verdicts: HashMap<String, Option<DataSensitivity>> = HashMap::new();
        for event in events.iter_mut() {
            let (Some(action_id), Some(Value::Object(data))) = (&event.action_id, &mut event.data)
            else {
                continue;
            };
            if !data.contains_key("output") {
                continue;
            }
            let verdict = match verdicts.get(action_id.as_str()) {
                Some(verdict) => *verdict,
                None => {
                    let verdict = match self
                        .store()
                        .get_action(&caller.tenant, action_id.as_str())
                        .await?
                    {
                        Some(record) => self.withheld_output(caller, &record),
                        // An event outliving its action: nothing says its output is safe.
                        None => Some(DataSensitivity::Unknown),
                    };
                    verdicts.insert(action_id.as_str().to_owned(), verdict);
                    verdict
                }
            };
            if let Some(sensitivity) = verdict {
                data.remove("output");
                data.insert(
                    "output_withheld".to_owned(),
                    Value::String(sensitivity.as_str().to_owned()),
                );
            }
        }
        Ok(())
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
