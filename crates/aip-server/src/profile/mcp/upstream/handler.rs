//! An upstream MCP tool as an AIP capability handler: every call is a native action admitted
//! before it reaches the upstream (schema, auth, tenant, idempotency, approvals), and its result,
//! receipts and read model are the runtime's.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use aip_core::{ErrorCode, StreamChunkKind};
use aip_runtime::handler::{
    ActionHandler, HandlerError, HandlerOutput, HandlerSupport, Mode, TrustedContext,
};
use async_trait::async_trait;
use serde_json::{Value, json};

use super::client::{Upstream, UpstreamError};

/// Calls one tool of one upstream.
pub struct ToolHandler {
    pub(super) upstream: Arc<Upstream>,
    pub(super) tool: String,
    /// Whether the tool may change something (then an interrupted call is an uncertain outcome).
    pub(super) mutation: bool,
    pub(super) timeout: Duration,
    /// Where the tool's requests for the calling client go (sampling, elicitation).
    pub(super) relay: Option<Arc<crate::profile::mcp::relay::Relay>>,
}

#[async_trait]
impl ActionHandler for ToolHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            // Streaming: the upstream's progress and log notifications become stream chunks.
            modes: BTreeSet::from([Mode::Sync, Mode::Async, Mode::Streaming]),
            // Cancelling a mutation cannot prove it did not happen.
            cancellable: !self.mutation,
            mutation: self.mutation,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        let timeout = self.timeout.min(ctx.remaining());
        let id = self.upstream.reserve_id();
        let mut params = json!({ "name": self.tool, "arguments": input });
        // A streaming action hears the tool's progress (token: the request id) and log messages.
        let mut notes = ctx.chunks.is_streaming().then(|| {
            params["_meta"] = json!({ "progressToken": id });
            self.upstream.listen(id)
        });
        let call = self.upstream.request_as(id, "tools/call", params, timeout);
        tokio::pin!(call);
        let mut forwarded = 0;
        let outcome = loop {
            tokio::select! {
                outcome = &mut call => break outcome,
                note = next_note(&mut notes) => match note {
                    Some(note) if note.get("id").is_some() => self.relay_request(ctx, note),
                    Some(note) => forward(ctx, &note, &mut forwarded).await?,
                    None => notes = None,
                },
                () = ctx.cancellation.cancelled(), if !self.mutation => {
                    self.upstream.unlisten(id);
                    self.upstream.cancel(id, "the AIP action was cancelled").await;
                    return Err(HandlerError::Cancelled);
                }
            }
        };
        self.upstream.unlisten(id);
        // What arrived just before the response still belongs to the call.
        while let Some(note) = notes.as_mut().and_then(|rx| rx.try_recv().ok()) {
            if note.get("id").is_none() {
                forward(ctx, &note, &mut forwarded).await?;
            }
        }
        match outcome {
            Ok(result) => project(&result),
            Err(err) => Err(self.failure(err)),
        }
    }
}

impl ToolHandler {
    /// A request of the tool for the calling client (sampling, elicitation): relayed to it when
    /// its call is followed on this node and it answers such requests, refused otherwise; the
    /// answer goes upstream. Runs beside the call (the tool waits for it).
    fn relay_request(&self, ctx: &TrustedContext, request: Value) {
        let upstream = Arc::clone(&self.upstream);
        let relay = self.relay.clone();
        let action_id = ctx.action_id.clone();
        let wait = ctx.remaining();
        tokio::spawn(async move {
            let id = request.get("id").cloned().unwrap_or(Value::Null);
            let method = request
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let params = request.get("params").cloned().unwrap_or(Value::Null);
            let outcome = match relay {
                Some(relay) => relay.ask(&action_id, method, params, wait).await,
                None => Err((-32601, format!("{method} is not supported by this client"))),
            };
            upstream.respond(id, outcome).await;
        });
    }

    /// A transport failure after the request may have reached the upstream is an uncertain
    /// outcome for a mutation (spec 19.3: never retried), a retryable failure for a read.
    fn failure(&self, err: UpstreamError) -> HandlerError {
        let failed = |code: ErrorCode, retryable: bool, message: String| HandlerError::Failed {
            code: code.as_str().into(),
            message,
            retryable,
        };
        match err {
            UpstreamError::Unavailable(m) => failed(
                ErrorCode::ConnectorUnreachable,
                true,
                format!("{}: {m}", self.upstream.name),
            ),
            UpstreamError::Lost(_) | UpstreamError::Timeout if self.mutation => {
                HandlerError::UncertainOutcome(format!(
                    "upstream {} tool {}: {err}",
                    self.upstream.name, self.tool
                ))
            }
            UpstreamError::Lost(m) => failed(ErrorCode::ConnectorFailed, true, m),
            UpstreamError::Timeout => failed(
                ErrorCode::ConnectorFailed,
                true,
                "the upstream did not answer in time".into(),
            ),
            UpstreamError::Rpc { code, message } => failed(
                ErrorCode::ConnectorProtocol,
                false,
                format!("upstream error {code}: {message}"),
            ),
            UpstreamError::Protocol(m) => failed(ErrorCode::ConnectorProtocol, false, m),
        }
    }
}

/// Most notifications one call forwards as chunks (the rest are dropped, logged).
const MAX_FORWARDED: usize = 1000;

/// The next notification, when the call listens for them.
async fn next_note(notes: &mut Option<tokio::sync::mpsc::Receiver<Value>>) -> Option<Value> {
    match notes {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// An upstream notification as a stream chunk: progress as a `progress` chunk
/// `{progress, total?, message?}`, a log message as a `thought` chunk `{log: {level, logger?,
/// data}}` (profiles project them back: MCP `notifications/progress` and `notifications/message`).
async fn forward(
    ctx: &TrustedContext,
    note: &Value,
    forwarded: &mut usize,
) -> Result<(), HandlerError> {
    let params = note.get("params").cloned().unwrap_or(Value::Null);
    let chunk = match note.get("method").and_then(Value::as_str) {
        Some("notifications/progress") => {
            let Some(progress) = params.get("progress").filter(|p| p.is_number()) else {
                return Ok(());
            };
            let mut data = json!({ "progress": progress });
            if let Some(total) = params.get("total").filter(|t| t.is_number()) {
                data["total"] = total.clone();
            }
            if let Some(message) = params.get("message").and_then(Value::as_str) {
                data["message"] = json!(message.chars().take(1024).collect::<String>());
            }
            (StreamChunkKind::Progress, data)
        }
        Some("notifications/message") => {
            let level = params
                .get("level")
                .and_then(Value::as_str)
                .unwrap_or("info");
            let mut log = json!({ "level": level, "data": params.get("data").cloned().unwrap_or(Value::Null) });
            if let Some(logger) = params.get("logger").and_then(Value::as_str) {
                log["logger"] = json!(logger);
            }
            if log.to_string().len() > 16 * 1024 {
                log["data"] = json!("(an upstream log message larger than 16 KiB was cut)");
            }
            (StreamChunkKind::Thought, json!({ "log": log }))
        }
        _ => return Ok(()),
    };
    if *forwarded >= MAX_FORWARDED {
        tracing::debug!(action = %ctx.action_id, "upstream notification dropped: the call forwarded its maximum");
        return Ok(());
    }
    *forwarded += 1;
    ctx.chunks.emit(chunk.0, Some(chunk.1)).await.map(|_| ())
}

/// A `CallToolResult` as the action's output: `structuredContent` when the tool gives one, else
/// `{"content": [...]}`; `isError` is a definite failure with the tool's text.
fn project(result: &Value) -> Result<HandlerOutput, HandlerError> {
    let text: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        let message: String = text.join("\n").chars().take(2048).collect();
        return Err(HandlerError::Failed {
            code: ErrorCode::ConnectorToolError.as_str().into(),
            message: if message.is_empty() {
                "the tool reported an error".into()
            } else {
                message
            },
            retryable: false,
        });
    }
    let output = match result.get("structuredContent") {
        Some(structured @ Value::Object(_)) => structured.clone(),
        _ => json!({ "content": result.get("content").cloned().unwrap_or_else(|| json!([])) }),
    };
    // The blocks themselves (images, audio, resources) as the result's message.
    let message = result
        .get("content")
        .and_then(Value::as_array)
        .map(|c| super::super::content::to_parts(c))
        .unwrap_or_default();
    Ok(HandlerOutput { output, message })
}

/// Reads one resource of one upstream (`resources/read`): the capability that produces the
/// upstream's resources offered as AIP resources (`resources = true`). Read-only, so a lost call is
/// retryable, never uncertain.
pub struct ResourceHandler {
    /// The tool-shaped caller (its failure mapping), with `tool` = `resources/read`.
    pub(super) reader: ToolHandler,
    /// The AIP resource id prefix of this upstream's resources (`mcp:<name>:`).
    pub(super) id_prefix: String,
}

#[async_trait]
impl ActionHandler for ResourceHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync]),
            cancellable: true,
            mutation: false,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        let uri = input
            .get("resource_id")
            .and_then(Value::as_str)
            .and_then(|id| id.strip_prefix(&self.id_prefix))
            .ok_or_else(|| HandlerError::Failed {
                code: ErrorCode::InvalidInput.as_str().into(),
                message: format!("not a resource of upstream {}", self.reader.upstream.name),
                retryable: false,
            })?;
        let timeout = self.reader.timeout.min(ctx.remaining());
        let result = self
            .reader
            .upstream
            .request("resources/read", json!({ "uri": uri }), timeout)
            .await
            .map_err(|e| self.reader.failure(e))?;
        let contents = result
            .get("contents")
            .and_then(Value::as_array)
            .ok_or_else(|| HandlerError::Failed {
                code: ErrorCode::ConnectorProtocol.as_str().into(),
                message: "resources/read answered without contents".into(),
                retryable: false,
            })?;
        // One text content is the text itself; anything else is the contents as JSON.
        let output = match contents.as_slice() {
            [one] if one.get("text").is_some_and(Value::is_string) => one["text"].clone(),
            _ => Value::Array(contents.clone()),
        };
        Ok(HandlerOutput {
            output,
            message: Vec::new(),
        })
    }
}
