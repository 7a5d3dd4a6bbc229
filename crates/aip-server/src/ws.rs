//! WebSocket binding `aip.websocket.stream.v1` (spec 20.3) at `GET /aip/v1/ws`.
//!
//! The upgrade request passes the same Host/Origin guards and bearer authentication as every other
//! route; the identity it authenticated is the caller of every envelope on the connection, and each
//! envelope is still authorized by the runtime (`Runtime::handle`), exactly as over HTTP.
//!
//! - One text frame carries one complete envelope; any native envelope is accepted and its reply comes
//!   back on the connection, correlated by `in_response_to` (the request's correlation id, else its
//!   message id) and `correlation_id`. Requests are handled concurrently, so replies may overtake.
//! - A submitted streaming (or async) action is followed after its `ack`: every chunk, heartbeats while
//!   idle and the final result arrive as envelopes carrying the ack's `correlation_id`/`in_response_to`
//!   (the stream's subscription key), so several streams multiplex on one connection. An
//!   `action_events_request` with `follow: true` subscribes to an existing action the same way.
//!   Every streamed envelope carries `extensions["aip.websocket.stream.v1"] = {"event", "cursor"}`:
//!   `event` is the SSE event name, `cursor` the opaque resume position; putting that cursor in the
//!   `after` member of the same extension on a following `action_events_request` resumes after it.
//! - A binary data frame is answered with an `aip.core.v1.error` envelope
//!   (`aip.transport.unsupported_frame`); the connection stays open, because the spec asks to reject
//!   the frame, not the connection, and other streams on it are unaffected.
//! - Pings are answered with pongs, close frames are answered and end the connection (and its
//!   subscriptions); the server pings an idle connection every heartbeat interval.
//! - Outbound frames go through one bounded queue per connection. A consumer that lets it stay full,
//!   or whose socket accepts nothing, for `send_timeout` is disconnected with close code 1008 and reason
//!   `aip.transport.slow_consumer` (queued frames are dropped; the close frame gets the larger of
//!   `send_timeout` and 5 s to reach the peer, then the TCP connection is dropped): the server never
//!   buffers without bound. Incoming frames are limited to the HTTP body limit.

use std::sync::Arc;
use std::time::Duration;

use aip_core::{Envelope, ErrorBody, ErrorCode, MessageBody};
use aip_runtime::{Accept, Caller, Runtime, StreamPosition};
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Extension, State};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc, watch};

use crate::error::ApiError;
use crate::http::AppState;
use crate::sse::{EventSink, StreamEvent, StreamLimits};

/// The binding's profile id, also the key of its envelope extension.
pub const PROFILE: &str = "aip.websocket.stream.v1";

/// Close code of a policy-driven disconnect (RFC 6455 7.4.1).
const CLOSE_POLICY: u16 = 1008;
/// Close code of a node that restarts (IANA WebSocket close code registry, "Service Restart").
const CLOSE_RESTART: u16 = 1012;
/// Shortest time given to a closing frame to reach a slow peer.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// `GET /aip/v1/ws`: upgrades an authenticated request to an `aip.websocket.stream.v1` connection.
pub async fn upgrade(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => {
            return ApiError::with_status(
                rejection.status(),
                ErrorCode::WebsocketUpgradeRequired,
                rejection.body_text(),
            )
            .into_response();
        }
    };
    // The connection holds a node-wide stream slot from its upgrade to its close.
    let Some(slot) = state.open_streams.try_open() else {
        return crate::overload::OpenStreams::refusal(&axum::http::Method::GET, "/aip/v1/ws");
    };
    let limits = state.streaming;
    let runtime = Arc::clone(&state.runtime);
    // tungstenite's default 128 KiB read buffer per connection dominated the memory of idle
    // connections; frames larger than the buffer still arrive whole (it grows up to the frame limit).
    ws.read_buffer_size(WS_READ_BUFFER_BYTES)
        .write_buffer_size(WS_WRITE_BUFFER_BYTES)
        .max_message_size(limits.max_frame_bytes)
        .max_frame_size(limits.max_frame_bytes)
        .on_upgrade(move |socket| async move {
            serve_connection(socket, runtime, caller, limits).await;
            drop(slot);
        })
        .into_response()
}

/// Initial read buffer of a WebSocket connection.
const WS_READ_BUFFER_BYTES: usize = 8 * 1024;
/// Outgoing bytes buffered before a write is flushed to the socket.
const WS_WRITE_BUFFER_BYTES: usize = 8 * 1024;

/// Why the writer must close the connection now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    Open,
    /// The peer left or closed; answer politely.
    Normal,
    /// The consumer stalled past the send timeout.
    SlowConsumer,
}

/// The producer side of one connection: a bounded queue plus the close signal.
#[derive(Clone)]
struct Conn {
    tx: mpsc::Sender<Message>,
    close: Arc<watch::Sender<Closing>>,
    send_timeout: Duration,
}

impl Conn {
    /// Queues one frame; `false` when the connection is gone or the consumer stalled (then closing).
    async fn send(&self, message: Message) -> bool {
        if *self.close.borrow() != Closing::Open {
            return false;
        }
        match self.tx.send_timeout(message, self.send_timeout).await {
            Ok(()) => true,
            Err(mpsc::error::SendTimeoutError::Timeout(_)) => {
                self.stalled();
                false
            }
            Err(mpsc::error::SendTimeoutError::Closed(_)) => false,
        }
    }

    async fn send_envelope(&self, envelope: &Envelope) -> bool {
        self.send(Message::Text(envelope.to_json_string().into()))
            .await
    }

    fn stalled(&self) {
        let mut first = false;
        self.close.send_if_modified(|state| {
            first = *state == Closing::Open;
            if first {
                *state = Closing::SlowConsumer;
            }
            first
        });
        if first {
            metrics::counter!("aip_stream_slow_consumer_total").increment(1);
        }
    }

    fn close_normally(&self) {
        self.close.send_if_modified(|state| {
            let open = *state == Closing::Open;
            if open {
                *state = Closing::Normal;
            }
            open
        });
    }
}

async fn serve_connection(
    socket: WebSocket,
    runtime: Arc<Runtime>,
    caller: Caller,
    limits: StreamLimits,
) {
    metrics::gauge!("aip_ws_connections").increment(1.0);
    let (sink, mut incoming) = socket.split();
    let (tx, rx) = mpsc::channel::<Message>(limits.buffer_events.max(1));
    let (close_tx, close_rx) = watch::channel(Closing::Open);
    let conn = Conn {
        tx,
        close: Arc::new(close_tx),
        send_timeout: limits.send_timeout,
    };
    let writer = tokio::spawn(write_loop(sink, rx, Arc::clone(&conn.close), limits));
    // Requests in flight at once; reading pauses (backpressure) while all are taken.
    let inflight = Arc::new(Semaphore::new(limits.ws_max_streams.max(1)));
    // Streams followed at once on this connection.
    let streams = Arc::new(Semaphore::new(limits.ws_max_streams.max(1)));
    let mut closing = close_rx;
    let restarting = loop {
        let frame = tokio::select! {
            frame = incoming.next() => frame,
            _ = closing.wait_for(|c| *c != Closing::Open) => break false,
            () = crate::http::shutting_down() => break true,
        };
        match frame {
            Some(Ok(Message::Text(text))) => {
                let permit = tokio::select! {
                    permit = Arc::clone(&inflight).acquire_owned() => permit,
                    _ = closing.wait_for(|c| *c != Closing::Open) => break false,
                };
                let Ok(permit) = permit else { break false };
                let request = Request {
                    runtime: Arc::clone(&runtime),
                    caller: caller.clone(),
                    conn: conn.clone(),
                    streams: Arc::clone(&streams),
                    limits,
                };
                tokio::spawn(async move {
                    request.serve(text.as_str().as_bytes(), permit).await;
                });
            }
            Some(Ok(Message::Binary(_))) => {
                let error = ErrorCode::UnsupportedFrame.error(
                    "binary frames are unsupported in AIP 1.0 (spec 20.3); send one JSON envelope per text frame",
                );
                let envelope = Envelope::new(MessageBody::Error(ErrorBody { error }));
                if !conn.send_envelope(&envelope).await {
                    break false;
                }
            }
            // tungstenite answers pings itself (the pong goes out with the next write or read).
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            // The close handshake is answered by tungstenite; the connection ends here.
            Some(Ok(Message::Close(_))) | None => break false,
            Some(Err(err)) => {
                tracing::debug!(error = %err, "websocket read failed");
                break false;
            }
        }
    };
    if restarting {
        restart(&conn, &streams, limits).await;
    } else {
        conn.close_normally();
    }
    drop(conn);
    // After a restart frame the writer ends by itself once its close frame is out (every write
    // bounded by the send timeout, the close by its grace).
    let _ = writer.await;
    metrics::gauge!("aip_ws_connections").decrement(1.0);
}

/// The node shuts down: every followed stream sends its final resumable heartbeat (its cursor,
/// [`crate::sse::DRAINING_STATUS`]), then a close frame with 1012 "service restart" and the
/// reason `aip.runtime.draining` is queued after everything before it.
async fn restart(conn: &Conn, streams: &Arc<Semaphore>, limits: StreamLimits) {
    let all = u32::try_from(limits.ws_max_streams.max(1)).unwrap_or(u32::MAX);
    // Each stream task ends right after queuing its final frame, returning its permit.
    let _ = tokio::time::timeout(CLOSE_GRACE, streams.acquire_many(all)).await;
    let frame = CloseFrame {
        code: CLOSE_RESTART,
        reason: ErrorCode::Draining.as_str().into(),
    };
    // Refused only when the connection is already closing, which ends the writer anyway.
    let _ = conn.send(Message::Close(Some(frame))).await;
}

/// Drains the queue into the socket, pings while idle, and closes when told to.
async fn write_loop(
    mut sink: futures_util::stream::SplitSink<WebSocket, Message>,
    mut rx: mpsc::Receiver<Message>,
    closer: Arc<watch::Sender<Closing>>,
    limits: StreamLimits,
) {
    let mut close = closer.subscribe();
    let mut ping = tokio::time::interval(limits.heartbeat);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ping.tick().await;
    let reason = loop {
        let message = tokio::select! {
            biased;
            closing = close.wait_for(|c| *c != Closing::Open) => break closing.map_or(Closing::Normal, |c| *c),
            message = rx.recv() => match message {
                Some(message) => message,
                None => break Closing::Normal,
            },
            _ = ping.tick() => Message::Ping(axum::body::Bytes::new()),
        };
        let last = matches!(message, Message::Close(_));
        let sent = tokio::select! {
            sent = tokio::time::timeout(limits.send_timeout, sink.send(message)) => sent,
            closing = close.wait_for(|c| *c != Closing::Open) => break closing.map_or(Closing::Normal, |c| *c),
        };
        match sent {
            Ok(Ok(())) if last => break Closing::Normal,
            Ok(Ok(())) => ping.reset(),
            Ok(Err(_)) => break Closing::Normal,
            // The socket accepted nothing for the whole send timeout.
            Err(_) => {
                metrics::counter!("aip_stream_slow_consumer_total").increment(1);
                break Closing::SlowConsumer;
            }
        }
    };
    // The reader and every producer stop too; the queued frames are dropped, not delivered.
    closer.send_if_modified(|state| {
        let open = *state == Closing::Open;
        if open {
            *state = reason;
        }
        open
    });
    rx.close();
    drop(rx);
    // Best effort within a grace period: a stalled peer may never read it. `close` also flushes the
    // reply tungstenite queued to a peer's close frame. Nothing more is queued meanwhile.
    let grace = limits.send_timeout.max(CLOSE_GRACE);
    let _ = tokio::time::timeout(grace, async {
        if reason == Closing::SlowConsumer {
            let frame = CloseFrame {
                code: CLOSE_POLICY,
                reason: ErrorCode::SlowConsumer.as_str().into(),
            };
            let _ = sink.send(Message::Close(Some(frame))).await;
        }
        let _ = sink.close().await;
    })
    .await;
}

/// One incoming envelope, served in its own task.
struct Request {
    runtime: Arc<Runtime>,
    caller: Caller,
    conn: Conn,
    streams: Arc<Semaphore>,
    limits: StreamLimits,
}

impl Request {
    async fn serve(self, bytes: &[u8], permit: tokio::sync::OwnedSemaphorePermit) {
        let mut reply = self
            .runtime
            .handle(&self.caller, bytes, Accept::AnyMessage)
            .await;
        crate::links::add(&mut reply.envelope.body);
        drop(permit);
        let follow = match &reply.envelope.body {
            MessageBody::Ack(ack) => Some((
                ack.action_id.as_str().to_owned(),
                Ok(StreamPosition::After(0)),
            )),
            MessageBody::ActionEvents(events) => follow_request(bytes).map(|after| {
                let action_id = events.action_id.as_str().to_owned();
                let position = match after {
                    Some(cursor) => {
                        self.runtime
                            .parse_stream_cursor(&self.caller, &action_id, &cursor)
                    }
                    None => Ok(StreamPosition::After(0)),
                };
                (action_id, position)
            }),
            _ => None,
        };
        if !self.conn.send_envelope(&reply.envelope).await {
            return;
        }
        let Some((action_id, position)) = follow else {
            return;
        };
        let stream = StreamSink {
            conn: self.conn.clone(),
            reply: reply.envelope,
            last: std::sync::Mutex::new(None),
        };
        let Ok(_slot) = Arc::clone(&self.streams).try_acquire_owned() else {
            let mut error = ErrorCode::TooManyStreams.error(
                "this connection follows its maximum number of streams; follow this action later with an action_events_request (follow: true)",
            );
            error.retryable = Some(true);
            let _ = stream.send(StreamEvent::error("error".into(), error)).await;
            return;
        };
        let closed = self.conn.tx.clone();
        tokio::select! {
            () = crate::sse::resume(&self.runtime, &self.caller, &action_id, position, &stream, self.limits) => {}
            () = closed.closed() => {}
            () = crate::http::shutting_down() => {
                let last = stream.last.lock().map(|mut l| l.take()).unwrap_or_default();
                let _ = stream.send(crate::sse::draining_event(last)).await;
            }
        }
    }
}

/// `Some(after)` when `bytes` is an `action_events_request` asking to follow (`follow: true`), with the
/// optional stream cursor to resume after.
fn follow_request(bytes: &[u8]) -> Option<Option<String>> {
    let request: Value = serde_json::from_slice(bytes).ok()?;
    let body = request.get("body")?.get("action_events_request")?;
    if body.get("follow").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    Some(
        request
            .get("extensions")
            .and_then(|e| e.get(PROFILE))
            .and_then(|e| e.get("after"))
            .and_then(Value::as_str)
            .map(str::to_owned),
    )
}

/// One followed stream: its events become envelopes correlated with the reply that started it.
struct StreamSink {
    conn: Conn,
    reply: Envelope,
    /// The cursor of the last resumable event sent, for the final frame at shutdown.
    last: std::sync::Mutex<Option<String>>,
}

impl EventSink for StreamSink {
    async fn send(&self, event: StreamEvent) -> bool {
        let resumable = crate::sse::resumable(&event);
        let mut envelope = event.envelope;
        envelope
            .correlation_id
            .clone_from(&self.reply.correlation_id);
        envelope
            .in_response_to
            .clone_from(&self.reply.in_response_to);
        envelope.session_id.clone_from(&self.reply.session_id);
        envelope.extensions = Some(json!({ PROFILE: { "event": event.name, "cursor": event.id } }));
        if resumable && let Ok(mut last) = self.last.lock() {
            *last = Some(event.id);
        }
        self.conn.send_envelope(&envelope).await
    }
}
