//! Server-Sent Events binding `aip.sse.stream.v1` (spec 20.2).
//!
//! Every event carries an `id`, an event name from the spec's list and one compact envelope as `data`.
//! Every id is an opaque cursor from the store's cursor key, bound to the reader (and, for an action
//! stream, to that action): action streams encode the chunk position (the ack is position 0, the result
//! the end), the global feed the event sequence. A reconnect with `Last-Event-ID` replays from the
//! store, so it resumes on any node and after a restart with no gap and no duplicate. A cursor this
//! reader was not given (another action's, another reader's, a forged or malformed one) is a terminal
//! `error` event, never an empty 200 that invites a reconnect loop.
//!
//! Each connection has a bounded buffer; a consumer that accepts nothing for `send_timeout` is cut
//! off: what is still queued is dropped and the response ends with an `aip.transport.slow_consumer`
//! error event, which the consumer reads after the events already in flight.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aip_core::{
    ActionResult, Envelope, ErrorBody, ErrorCode, EventStream, Heartbeat, MessageBody,
    ProtocolError, StreamChunk, StreamChunkKind,
};
use aip_runtime::{Caller, Reply, Runtime, RuntimeError, StreamItem, StreamPosition};
use axum::http::{HeaderMap, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

/// Profile id of this binding (spec 20.2).
pub const PROFILE: &str = "aip.sse.stream.v1";

/// Per-connection streaming bounds (documented in docs/configuration.md).
#[derive(Debug, Clone, Copy)]
pub struct StreamLimits {
    /// Idle time after which a `heartbeat` event is sent (spec 11.9).
    pub heartbeat: Duration,
    /// How long a full connection buffer may stay full before the consumer is disconnected.
    pub send_timeout: Duration,
    /// Events (SSE) or frames (WebSocket) queued per connection.
    pub buffer_events: usize,
    /// Largest incoming WebSocket frame and message (the HTTP body limit).
    pub max_frame_bytes: usize,
    /// Requests in flight and streams followed at once per WebSocket connection (each bound).
    pub ws_max_streams: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            heartbeat: Duration::from_secs(15),
            send_timeout: Duration::from_secs(30),
            buffer_events: 64,
            max_frame_bytes: 1024 * 1024,
            ws_max_streams: 64,
        }
    }
}

/// Whether the client asked for an event stream.
pub fn wants_sse(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"))
}

/// An SSE event ready to send: name, id and envelope.
#[derive(Debug, Clone)]
pub struct StreamEvent {
    /// Spec 20.2 event name.
    pub name: &'static str,
    /// Replay id.
    pub id: String,
    /// The envelope carried as `data`.
    pub envelope: Envelope,
}

impl StreamEvent {
    pub(crate) fn error(id: String, error: ProtocolError) -> Self {
        Self {
            name: "error",
            id,
            envelope: Envelope::new(MessageBody::Error(ErrorBody { error })),
        }
    }

    /// The event as SSE; an empty id is left out (the client keeps the last one it had).
    fn to_sse(&self) -> Event {
        let data = String::from_utf8_lossy(&self.envelope.to_json_vec()).into_owned();
        let event = Event::default().event(self.name).data(data);
        if self.id.is_empty() {
            event
        } else {
            event.id(&self.id)
        }
    }
}

/// The answer to an envelope submitted with `Accept: text/event-stream`: the reply as its event, then,
/// for an admitted streaming (or async) action, every chunk and the final result.
pub fn submitted(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    reply: Reply,
    limits: StreamLimits,
) -> Response {
    let runtime = Arc::clone(runtime);
    let caller = caller.clone();
    spawn_stream(limits, move |tx| async move {
        let envelope = reply.envelope;
        match &envelope.body {
            MessageBody::Ack(ack) => {
                let action_id = ack.action_id.as_str().to_owned();
                let first = StreamEvent {
                    name: "ack",
                    id: runtime.stream_cursor(&caller, &action_id, StreamPosition::After(0)),
                    envelope: envelope.clone(),
                };
                if !tx.send(first).await {
                    return;
                }
                follow(&runtime, &caller, &action_id, 0, &tx, limits).await;
            }
            MessageBody::ActionResult(result) => {
                let id =
                    runtime.stream_cursor(&caller, result.action_id.as_str(), StreamPosition::End);
                let _ = tx
                    .send(StreamEvent {
                        name: "result",
                        id,
                        envelope: envelope.clone(),
                    })
                    .await;
            }
            MessageBody::Error(_) => {
                let _ = tx
                    .send(StreamEvent {
                        name: "error",
                        id: "error".into(),
                        envelope: envelope.clone(),
                    })
                    .await;
            }
            _ => {
                let _ = tx
                    .send(StreamEvent {
                        name: "message",
                        id: "message".into(),
                        envelope: envelope.clone(),
                    })
                    .await;
            }
        }
    })
}

/// `GET /aip/v1/actions/{id}/events` as an event stream, resuming after `Last-Event-ID`.
pub fn action_stream(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    action_id: String,
    headers: &HeaderMap,
    limits: StreamLimits,
) -> Response {
    let runtime = Arc::clone(runtime);
    let caller = caller.clone();
    let last = last_event_id(headers);
    spawn_stream(limits, move |tx| async move {
        let position = match last.as_deref() {
            None => Ok(StreamPosition::After(0)),
            Some(id) => runtime.parse_stream_cursor(&caller, &action_id, id),
        };
        resume(&runtime, &caller, &action_id, position, &tx, limits).await;
    })
}

/// Continues one action's stream from a parsed position: chunks and the result after a chunk, only
/// the (idempotent) terminal result after the end, a terminal error for a refused cursor.
pub(crate) async fn resume<S: EventSink>(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    action_id: &str,
    position: Result<StreamPosition, RuntimeError>,
    tx: &S,
    limits: StreamLimits,
) {
    match position {
        Ok(StreamPosition::After(after)) => {
            follow(runtime, caller, action_id, after, tx, limits).await;
        }
        Ok(StreamPosition::End) => match runtime.action_result(caller, action_id, None).await {
            Ok(result) => {
                let _ = tx
                    .send(result_event(runtime, caller, action_id, result))
                    .await;
            }
            Err(err) => {
                let _ = tx
                    .send(StreamEvent::error("error".into(), err.to_protocol_error()))
                    .await;
            }
        },
        Err(err) => {
            let _ = tx
                .send(StreamEvent::error("error".into(), err.to_protocol_error()))
                .await;
        }
    }
}

/// `GET /aip/v1/events` as an event stream of the reader's events (one `message` event per event,
/// carrying an `event_stream_response` envelope), resuming after `Last-Event-ID`.
pub fn event_feed(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    headers: &HeaderMap,
    limits: StreamLimits,
) -> Response {
    let runtime = Arc::clone(runtime);
    let caller = caller.clone();
    let mut cursor = last_event_id(headers);
    spawn_stream(limits, move |tx| async move {
        let wait = u64::try_from(limits.heartbeat.as_millis())
            .unwrap_or(u64::MAX)
            .min(runtime.max_wait_ms());
        let mut beat = 0_u64;
        loop {
            // One event per page so that every SSE id resumes exactly after its event.
            let request = aip_core::EventStreamRequest {
                cursor: cursor.clone(),
                limit: Some(1),
                kinds: Vec::new(),
            };
            let page = match runtime.read_events(&caller, &request, Some(wait)).await {
                Ok(page) => page,
                Err(err) => {
                    let id = cursor.clone().unwrap_or_else(|| "error".into());
                    let _ = tx
                        .send(StreamEvent::error(id, err.to_protocol_error()))
                        .await;
                    return;
                }
            };
            let next = page.next_cursor.clone();
            let event = if page.events.is_empty() {
                if wait == 0 {
                    tokio::time::sleep(limits.heartbeat).await;
                }
                beat += 1;
                heartbeat_event(next.clone().unwrap_or_default(), beat)
            } else {
                StreamEvent {
                    name: "message",
                    id: next.clone().unwrap_or_default(),
                    envelope: Envelope::new(MessageBody::EventStream(EventStream {
                        events: page.events,
                        next_cursor: next.clone(),
                    })),
                }
            };
            if !tx.send(event).await {
                return;
            }
            if next.is_some() {
                cursor = next;
            }
        }
    })
}

/// Where a stream's events go: an SSE connection's buffer or a WebSocket connection's queue.
pub(crate) trait EventSink: Sync {
    /// Queues one event; `false` when the consumer left or stalled (the stream then stops).
    fn send(&self, event: StreamEvent) -> impl std::future::Future<Output = bool> + Send;
}

/// Sends chunks and the result of one action after chunk `after`, with heartbeats while idle.
pub(crate) async fn follow<S: EventSink>(
    runtime: &Arc<Runtime>,
    caller: &Caller,
    action_id: &str,
    after: u64,
    tx: &S,
    limits: StreamLimits,
) {
    let mut follower = match runtime
        .follow_action(caller, action_id, after, limits.heartbeat)
        .await
    {
        Ok(f) => f,
        Err(err) => {
            let _ = tx
                .send(StreamEvent::error("error".into(), err.to_protocol_error()))
                .await;
            return;
        }
    };
    let mut beat = 0_u64;
    loop {
        let event = match follower.next().await {
            Ok(Some(StreamItem::Chunk(chunk))) => chunk_event(runtime, caller, chunk),
            Ok(Some(StreamItem::Result(result))) => {
                result_event(runtime, caller, action_id, *result)
            }
            Ok(Some(StreamItem::Idle)) => {
                beat += 1;
                let at = StreamPosition::After(follower.position());
                heartbeat_event(runtime.stream_cursor(caller, action_id, at), beat)
            }
            Ok(None) => return,
            Ok(Some(_)) => continue,
            Err(err) => {
                // The id resumes where the stream stopped, so a transient failure can be retried.
                let at = StreamPosition::After(follower.position());
                StreamEvent::error(
                    runtime.stream_cursor(caller, action_id, at),
                    stream_error(&err),
                )
            }
        };
        let terminal = matches!(event.name, "result" | "error");
        if !tx.send(event).await || terminal {
            return;
        }
    }
}

fn chunk_event(runtime: &Runtime, caller: &Caller, chunk: StreamChunk) -> StreamEvent {
    let id = runtime.stream_cursor(
        caller,
        chunk.action_id.as_str(),
        StreamPosition::After(chunk.sequence),
    );
    let name = if chunk.kind == StreamChunkKind::Done {
        "done"
    } else {
        "chunk"
    };
    StreamEvent {
        name,
        id,
        envelope: Envelope::new(MessageBody::StreamChunk(chunk)),
    }
}

fn result_event(
    runtime: &Runtime,
    caller: &Caller,
    action_id: &str,
    result: ActionResult,
) -> StreamEvent {
    StreamEvent {
        name: "result",
        id: runtime.stream_cursor(caller, action_id, StreamPosition::End),
        envelope: Envelope::new(MessageBody::ActionResult(result)),
    }
}

fn heartbeat_event(id: String, sequence: u64) -> StreamEvent {
    StreamEvent {
        name: "heartbeat",
        id,
        envelope: Envelope::new(MessageBody::Heartbeat(Heartbeat {
            sequence,
            status: Some("streaming".into()),
            progress: None,
        })),
    }
}

fn stream_error(err: &RuntimeError) -> ProtocolError {
    err.to_protocol_error()
}

fn last_event_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.len() <= 512)
        .map(str::to_owned)
}

/// The producer side of one connection's bounded buffer.
pub(crate) struct Sender {
    inner: mpsc::Sender<StreamEvent>,
    send_timeout: Duration,
    stalled: Arc<AtomicBool>,
}

impl EventSink for Sender {
    /// Queues one event; `false` when the consumer left or stalled past the send timeout.
    async fn send(&self, event: StreamEvent) -> bool {
        match self.inner.send_timeout(event, self.send_timeout).await {
            Ok(()) => true,
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                metrics::counter!("aip_stream_slow_consumer_total").increment(1);
                // The response skips what is still queued and ends with the typed error, which the
                // consumer reads as soon as it reads again (the connection holds nothing more).
                self.stalled.store(true, Ordering::Release);
                false
            }
            Err(mpsc::error::SendTimeoutError::Closed(_)) => false,
        }
    }
}

fn slow_consumer_event() -> StreamEvent {
    let error = ErrorCode::SlowConsumer
        .error("the consumer did not keep up; the stream was closed (resume with Last-Event-ID)");
    StreamEvent::error("slow_consumer".into(), error)
}

/// The consumer side of one SSE connection: its queue and what the last event sent resumes from.
struct Feed {
    rx: mpsc::Receiver<StreamEvent>,
    last_id: Option<String>,
}

/// Whether an event's id is a resume cursor (not the placeholder of a one-off reply or error).
pub(crate) fn resumable(event: &StreamEvent) -> bool {
    !matches!(
        event.id.as_str(),
        "error" | "message" | "slow_consumer" | ""
    )
}

/// How long a client told to reconnect by a draining node waits first (SSE `retry`).
const RECONNECT_AFTER: Duration = Duration::from_secs(1);

/// The last frame of a stream whose node shuts down (spec 20.2): a `heartbeat` whose id is the
/// stream's resume cursor (absent when nothing was sent yet: the client keeps the one it has) and
/// whose status says to reconnect. Its sequence is 0, which no idle beat has. Not terminal, so
/// any SSE client reconnects with `Last-Event-ID` and gets what follows, once.
pub(crate) fn draining_event(last_id: Option<String>) -> StreamEvent {
    let mut event = heartbeat_event(last_id.unwrap_or_default(), 0);
    if let MessageBody::Heartbeat(beat) = &mut event.envelope.body {
        beat.status = Some(DRAINING_STATUS.into());
    }
    event
}

/// The status of the final heartbeat a draining node sends on every open stream.
pub const DRAINING_STATUS: &str = "draining: the node is shutting down; reconnect with this cursor";

fn spawn_stream<F, Fut>(limits: StreamLimits, produce: F) -> Response
where
    F: FnOnce(Sender) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<StreamEvent>(limits.buffer_events.max(1));
    let stalled = Arc::new(AtomicBool::new(false));
    let sender = Sender {
        inner: tx,
        send_timeout: limits.send_timeout,
        stalled: Arc::clone(&stalled),
    };
    tokio::spawn(produce(sender));
    let feed = Feed { rx, last_id: None };
    let stream = futures_util::stream::unfold(Some(feed), move |feed| {
        let stalled = Arc::clone(&stalled);
        async move {
            let mut feed = feed?;
            let event = if stalled.load(Ordering::Acquire) {
                None
            } else {
                tokio::select! {
                    biased;
                    event = feed.rx.recv() => event,
                    // The node is going away: tell the client where to resume, then end.
                    () = crate::http::shutting_down() => {
                        let last = draining_event(feed.last_id.take()).to_sse();
                        return Some((Ok(last.retry(RECONNECT_AFTER)), None));
                    }
                }
            };
            match event {
                Some(event) => {
                    let sse = event.to_sse();
                    if resumable(&event) {
                        feed.last_id = Some(event.id);
                    }
                    Some((Ok::<Event, Infallible>(sse), Some(feed)))
                }
                // Stalled: drop the queue, send the typed error, end.
                None if stalled.load(Ordering::Acquire) => {
                    Some((Ok(slow_consumer_event().to_sse()), None))
                }
                None => None,
            }
        }
    });
    // Transport-level keep-alive comments in addition to the protocol heartbeats.
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(limits.heartbeat))
        .into_response()
}
