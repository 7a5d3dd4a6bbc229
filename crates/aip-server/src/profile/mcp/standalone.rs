//! The standalone server-to-client stream (`GET /mcp` without `Last-Event-ID`) and resource
//! subscriptions, whose `notifications/resources/updated` it carries.
//!
//! A subscription (`resources/subscribe`) records the resource's content digest for the session on
//! this node; while the session has a standalone stream open here, the stream re-reads each
//! subscribed resource as the subscriber (its read policy re-checked) every few seconds and sends
//! one notification when the content changed or the resource is gone. Subscriptions are held in
//! this node's memory: a client whose standalone stream is served by another node is not notified.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use aip_runtime::Caller;
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Map, Value, json};

use super::McpState;
use super::rpc::{self, INVALID_PARAMS};
use super::tools::{CallOutcome, Outgoing};
use super::transport::{Endpoint, Session, ended, http_error, sse_response};

/// Most resources one session may subscribe to.
const MAX_SUBSCRIPTIONS: usize = 32;
/// Most sessions holding subscriptions on one node.
const MAX_SUBSCRIBED_SESSIONS: usize = 10_000;
/// How often an open standalone stream checks its session and its subscriptions.
const POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Most standalone streams one session may hold open on one node.
const MAX_STANDALONE: usize = 8;

/// Open standalone streams per session on this node.
#[derive(Debug, Default)]
pub struct Standalone(Mutex<HashMap<String, usize>>);

/// One open standalone stream, counted while it lives.
struct StandaloneSlot {
    mcp: Arc<McpState>,
    session: String,
}

impl Standalone {
    /// A slot for one more stream of `session`, unless it holds the most already.
    fn open(mcp: &Arc<McpState>, session: &str) -> Option<StandaloneSlot> {
        // A poisoned lock only means another stream panicked while counting: the counts stand.
        let mut open = mcp.standalone.0.lock().unwrap_or_else(|e| e.into_inner());
        let count = open.entry(session.to_owned()).or_insert(0);
        if *count >= MAX_STANDALONE {
            return None;
        }
        *count += 1;
        Some(StandaloneSlot {
            mcp: Arc::clone(mcp),
            session: session.to_owned(),
        })
    }
}

impl Drop for StandaloneSlot {
    fn drop(&mut self) {
        let mut open = self
            .mcp
            .standalone
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(count) = open.get_mut(&self.session) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.session);
            }
        }
    }
}

/// Subscribed resources per session on this node: uri -> digest of the content last seen.
#[derive(Debug, Default)]
pub struct Subscriptions(Mutex<HashMap<String, BTreeMap<String, String>>>);

impl Subscriptions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, BTreeMap<String, String>>> {
        // A poisoned lock only means a panic elsewhere while holding it: the map stands.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets a session's subscriptions (it ended).
    pub fn forget(&self, session: &str) {
        self.lock().remove(session);
    }
}

/// The runtime's etag of a resource's current content as `caller` reads it; `Ok(None)` when the
/// resource is gone (or no longer readable), `Err` for a failed read (not a change).
async fn etag(
    runtime: &Arc<aip_runtime::Runtime>,
    caller: &Caller,
    uri: &str,
) -> Result<Option<String>, aip_runtime::RuntimeError> {
    let request = aip_core::ResourceReadRequest {
        resource_id: uri.to_owned(),
        tenant_id: None,
        version: None,
        accept: Vec::new(),
    };
    match runtime.read_resource(caller, &request).await {
        Ok(read) => Ok(Some(read.etag.unwrap_or_default())),
        Err(aip_runtime::RuntimeError::NotFound(_)) => Ok(None),
        Err(err) => Err(err),
    }
}

/// `resources/subscribe`: only a resource the caller may read (else -32002, like a read).
pub async fn subscribe(
    endpoint: &Endpoint<'_>,
    session: &Session,
    params: &Map<String, Value>,
) -> CallOutcome {
    let runtime = &endpoint.app.runtime;
    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
        return Err((INVALID_PARAMS, "uri is required".to_owned()));
    };
    if runtime.resource_is_produced(uri) {
        return Err((
            INVALID_PARAMS,
            "a produced resource is made at each read: read it instead of subscribing".into(),
        ));
    }
    let seen = match etag(runtime, endpoint.caller, uri).await {
        Ok(Some(tag)) => tag,
        Ok(None) => {
            return Err((
                super::resources::RESOURCE_NOT_FOUND,
                format!("Resource not found: {uri}"),
            ));
        }
        Err(err) => return Err((super::rpc::INTERNAL_ERROR, err.to_string())),
    };
    let uri = uri.to_owned();
    let mut all = endpoint.mcp.subscriptions.lock();
    if !all.contains_key(&session.id) && all.len() >= MAX_SUBSCRIBED_SESSIONS {
        return Err((
            INVALID_PARAMS,
            "this node holds the most subscriptions it keeps".into(),
        ));
    }
    let mine = all.entry(session.id.clone()).or_default();
    if !mine.contains_key(&uri) && mine.len() >= MAX_SUBSCRIPTIONS {
        return Err((
            INVALID_PARAMS,
            format!("a session subscribes to at most {MAX_SUBSCRIPTIONS} resources"),
        ));
    }
    mine.insert(uri, seen);
    Ok(json!({}))
}

/// `resources/unsubscribe` (unsubscribing from a resource not subscribed to changes nothing).
pub fn unsubscribe(mcp: &McpState, session: &Session, params: &Map<String, Value>) -> CallOutcome {
    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
        return Err((INVALID_PARAMS, "uri is required".to_owned()));
    };
    let mut all = mcp.subscriptions.lock();
    if let Some(mine) = all.get_mut(&session.id) {
        mine.remove(uri);
        if mine.is_empty() {
            all.remove(&session.id);
        }
    }
    Ok(json!({}))
}

/// The `notifications/resources/updated` due for `session`: each subscribed resource re-read as
/// `caller`; a changed one gets its new digest, a gone (or no longer readable) one is dropped.
async fn updates(
    runtime: &Arc<aip_runtime::Runtime>,
    mcp: &McpState,
    caller: &Caller,
    session: &str,
) -> Vec<Value> {
    let subscribed: Vec<(String, String)> = mcp
        .subscriptions
        .lock()
        .get(session)
        .map(|m| m.iter().map(|(u, d)| (u.clone(), d.clone())).collect())
        .unwrap_or_default();
    let mut notes = Vec::new();
    for (uri, seen) in subscribed {
        let Ok(now) = etag(runtime, caller, &uri).await else {
            // A failed read (storage, I/O) is not a change: try again next time.
            continue;
        };
        if now.as_deref() == Some(seen.as_str()) {
            continue;
        }
        let mut all = mcp.subscriptions.lock();
        if let Some(mine) = all.get_mut(session) {
            match &now {
                Some(d) => {
                    mine.insert(uri.clone(), d.clone());
                }
                None => {
                    mine.remove(&uri);
                }
            }
        }
        drop(all);
        notes.push(
            json!({ "jsonrpc": "2.0", "method": "notifications/resources/updated",
                           "params": { "uri": uri } }),
        );
    }
    notes
}

/// The standalone stream of `session`: open while the session is, carrying its resource updates.
pub fn open(endpoint: &Endpoint<'_>, mcp: &Arc<McpState>, session: Session) -> Response {
    let Some(slot) = Standalone::open(mcp, &session.id) else {
        return http_error(
            StatusCode::TOO_MANY_REQUESTS,
            rpc::INVALID_REQUEST,
            "this session holds the most standalone streams already",
        );
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Outgoing>(8);
    let runtime = Arc::clone(&endpoint.app.runtime);
    let caller = endpoint.caller.clone();
    let mcp = Arc::clone(mcp);
    let send_timeout = endpoint.app.streaming.send_timeout;
    tokio::spawn(async move {
        let _slot = slot;
        loop {
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                () = tx.closed() => return,
                () = crate::http::shutting_down() => return,
            }
            // Ends with the session (deleted, expired, or closed on another node).
            match runtime.owned_session(&caller, &session.id).await {
                Ok(record) if !ended(record.state) => {}
                Ok(_) | Err(aip_runtime::RuntimeError::NotFound(_)) => {
                    mcp.subscriptions.forget(&session.id);
                    return;
                }
                // A storage hiccup is not the session's end: check again at the next tick.
                Err(err) => {
                    tracing::warn!(error = %err, "MCP standalone stream: session check failed");
                    continue;
                }
            }
            for message in updates(&runtime, &mcp, &caller, &session.id).await {
                let out = Outgoing { id: None, message };
                // A reader that stopped reading loses its stream (bounded, never held forever).
                if !matches!(
                    tokio::time::timeout(send_timeout, tx.send(out)).await,
                    Ok(Ok(()))
                ) {
                    return;
                }
            }
        }
    });
    sse_response(rx, endpoint.app.streaming.heartbeat)
}
