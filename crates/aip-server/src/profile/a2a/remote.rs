//! Outbound A2A (`[[a2a_remotes]]`): skills of a remote A2A 1.0 agent served here as governed
//! capabilities. Calls are admitted like any capability (schema, scopes, idempotency, approvals,
//! receipts); running one is a native delegation (spec 14): the parent action records the child it
//! makes and the remote's pinned identity, and the remote task's state is projected back.
//!
//! A URL alone is not identity (spec 14.2): at startup the remote's agent card must state the
//! configured `agent_name`, its JSON-RPC interface must be on the configured origin, and, when
//! `card_sha256` is set, the card's RFC 8785 digest must be that value; `https://` remotes are
//! verified against the system roots or `ca_file`. Calls carry the configured bearer token.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use aip_core::{ErrorCode, MessagePart};
use aip_runtime::handler::{
    ActionHandler, HandlerError, HandlerOutput, HandlerSupport, Mode, Reconciliation,
    TrustedContext,
};
use aip_runtime::registry::CapabilityEntry;
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::config::ConfigError;
pub use crate::config::a2a::RemoteConfig;

/// Largest card or answer read from a remote.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// Longest wait for the card at startup.
const CARD_TIMEOUT: Duration = Duration::from_secs(20);
/// Longest wait for one JSON-RPC answer (a blocking remote holds `SendMessage` at most this long;
/// the task is then followed with `GetTask`).
const RPC_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest pause between two `GetTask` reads of a running remote task.
const MAX_POLL: Duration = Duration::from_secs(2);

/// A remote agent, checked against its pins.
struct Remote {
    name: String,
    /// The JSON-RPC endpoint its card names.
    rpc_url: String,
    bearer: Option<String>,
    client: reqwest::Client,
    /// What the delegation records as the peer's identity.
    identity: Value,
}

/// Connects every remote and returns its skills as capabilities. A remote whose card cannot be
/// read, or does not match its pins, or lacks a configured skill stops startup with a message.
pub async fn capabilities(configs: &[RemoteConfig]) -> Result<Vec<CapabilityEntry>, ConfigError> {
    let mut names = BTreeSet::new();
    let mut entries = Vec::new();
    for config in configs {
        let key = |k: &str| format!("a2a_remotes[{}]{k}", config.name);
        let fail = |e: RemoteError| crate::config::unreachable(key(""), e);
        if !names.insert(config.name.as_str()) {
            return Err(ConfigError::Duplicate {
                key: "a2a_remotes[].name".into(),
                id: config.name.clone(),
            });
        }
        let (remote, card) = connect(config).await?;
        let remote = Arc::new(remote);
        let skills: BTreeMap<&str, &Value> = card
            .get("skills")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|s| s.get("id").and_then(Value::as_str).map(|id| (id, s)))
            .collect();
        if let Some(unknown) = config.overrides.keys().find(|k| !config.skills.contains(k)) {
            return Err(ConfigError::Unknown {
                key: key(".overrides"),
                kind: "offered skill",
                name: unknown.clone(),
            });
        }
        let prefix = config
            .capability_prefix
            .clone()
            .unwrap_or_else(|| format!("cap:a2a:{}:", config.name));
        for skill in &config.skills {
            let card_skill = skills
                .get(skill.as_str())
                .ok_or_else(|| fail(RemoteError::NoSkill(skill.clone())))?;
            let text = |k: &str| card_skill.get(k).and_then(Value::as_str).unwrap_or(skill);
            // A skill states no input schema: any object, checked by the remote.
            let tool = json!({ "name": skill, "title": text("name"), "description": text("description"),
                               "inputSchema": { "type": "object" } });
            let overrides = config.overrides.get(skill).cloned().unwrap_or_default();
            let (capability, mutation) =
                crate::profile::mcp::upstream::capability(&prefix, &tool, &overrides)
                    .map_err(|e| crate::config::rejected(key(&format!(".skills[{skill}]")), e))?;
            let handler = SkillHandler {
                remote: Arc::clone(&remote),
                skill: skill.clone(),
                mutation,
                timeout: Duration::from_millis(config.call_timeout_ms),
            };
            entries.push(CapabilityEntry::from((
                capability,
                Arc::new(handler) as Arc<dyn ActionHandler>,
            )));
        }
    }
    Ok(entries)
}

/// `scheme://host[:port]` of an http(s) URL.
fn origin(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return None;
    }
    Some(parsed.origin().ascii_serialization())
}

/// Why a remote A2A agent is not served: its card could not be read, or does not match what the
/// entry pins (spec 14.2: a URL alone is not identity).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The card could not be fetched (unreachable, an HTTP error, too large, not JSON).
    #[error("{url}: {reason}")]
    Card {
        /// The card's URL.
        url: String,
        /// What the client saw.
        reason: String,
    },
    /// The card states another agent name.
    #[error("the card names the agent {stated:?}, not the pinned {pinned:?}")]
    AgentName {
        /// The name on the card.
        stated: String,
        /// The configured `agent_name`.
        pinned: String,
    },
    /// The card's RFC 8785 digest is not the pinned one.
    #[error("the card's digest is {digest}, not the pinned {pin}")]
    Digest {
        /// The card's digest.
        digest: String,
        /// The configured `card_sha256`.
        pin: String,
    },
    /// The card offers no A2A 1.0 JSON-RPC interface.
    #[error("the card offers no A2A 1.0 JSON-RPC interface")]
    NoInterface,
    /// The card's JSON-RPC interface is on another origin than the configured URL.
    #[error("the card's interface {url} is not on the pinned origin {origin}")]
    Origin {
        /// The interface URL.
        url: String,
        /// The configured URL's origin.
        origin: String,
    },
    /// A configured skill is not on the card.
    #[error("the agent card has no skill {0}")]
    NoSkill(String),
}

/// Reads and checks the card; the remote and its card.
async fn connect(config: &RemoteConfig) -> Result<(Remote, Value), ConfigError> {
    let key = |k: &str| format!("a2a_remotes[{}]{k}", config.name);
    let unreadable = |k: &str, path: &std::path::Path| {
        let key = key(k);
        let path = path.to_path_buf();
        move |source| ConfigError::Unreadable { key, path, source }
    };
    let fail = |e: RemoteError| crate::config::unreachable(key(""), e);
    let base = config.url.trim_end_matches('/');
    let pinned = origin(base)
        .ok_or_else(|| crate::config::malformed(key(".url"), base, "an http(s) URL"))?;
    let roots = match &config.ca_file {
        Some(path) => Some(std::fs::read(path).map_err(unreadable(".ca_file", path))?),
        None => None,
    };
    let client = aip_runtime::handler::http::trusting_client(roots.as_deref())
        .map_err(|e| crate::config::rejected(key(".ca_file"), e))?;
    let bearer = match &config.bearer_token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(unreadable(".bearer_token_file", path))?
                .trim()
                .to_owned(),
        ),
        None => None,
    };
    let card_url = format!("{base}/.well-known/agent-card.json");
    let card_error = |reason: String| {
        fail(RemoteError::Card {
            url: card_url.clone(),
            reason,
        })
    };
    let response = client
        .get(&card_url)
        .timeout(CARD_TIMEOUT)
        .send()
        .await
        .map_err(|e| card_error(e.to_string()))?;
    if !response.status().is_success() {
        return Err(card_error(format!("HTTP {}", response.status())));
    }
    let body = bounded_body(response).await.map_err(card_error)?;
    let card: Value =
        serde_json::from_slice(&body).map_err(|_| card_error("the card is not JSON".into()))?;
    let stated = card.get("name").and_then(Value::as_str).unwrap_or_default();
    if stated != config.agent_name {
        return Err(fail(RemoteError::AgentName {
            stated: stated.to_owned(),
            pinned: config.agent_name.clone(),
        }));
    }
    let digest = aip_core::canonical::sha256_hex(&aip_core::canonical::to_canonical_vec(&card));
    if let Some(pin) = &config.card_sha256
        && !pin.eq_ignore_ascii_case(&digest)
    {
        return Err(fail(RemoteError::Digest {
            digest,
            pin: pin.clone(),
        }));
    }
    let rpc_url = card
        .get("supportedInterfaces")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .find(|i| {
            i.get("protocolBinding").and_then(Value::as_str) == Some("JSONRPC")
                && i.get("protocolVersion")
                    .and_then(Value::as_str)
                    .is_none_or(|v| v == super::PROTOCOL_VERSION)
        })
        .and_then(|i| i.get("url").and_then(Value::as_str))
        .ok_or_else(|| fail(RemoteError::NoInterface))?
        .to_owned();
    if origin(&rpc_url).as_deref() != Some(pinned.as_str()) {
        return Err(fail(RemoteError::Origin {
            url: rpc_url,
            origin: pinned,
        }));
    }
    let identity = json!({ "profile": super::PROFILE, "origin": pinned, "agent_name": stated,
                           "card_sha256": digest, "interface": rpc_url });
    Ok((
        Remote {
            name: config.name.clone(),
            rpc_url,
            bearer,
            client,
            identity,
        },
        card,
    ))
}

/// The body of `response`, refused past [`MAX_ANSWER_BYTES`].
async fn bounded_body(response: reqwest::Response) -> Result<Vec<u8>, String> {
    aip_runtime::handler::peer::read_bounded(response, MAX_ANSWER_BYTES).await
}

/// Why a call to the remote did not give an answer.
enum CallError {
    /// Nothing was delivered (connection refused, DNS): safe to retry.
    NotSent(String),
    /// Sent, then no usable answer: the outcome is unknown.
    Lost(String),
    /// The remote answered with a JSON-RPC error.
    Refused(String),
}

impl Remote {
    /// One JSON-RPC call.
    async fn call(&self, method: &str, params: Value, wait: Duration) -> Result<Value, CallError> {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        let mut request = self
            .client
            .post(&self.rpc_url)
            .timeout(wait)
            .header("A2A-Version", super::PROTOCOL_VERSION)
            .json(&body);
        if let Some(token) = &self.bearer {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| {
            if e.is_connect() {
                CallError::NotSent(e.to_string())
            } else {
                CallError::Lost(e.to_string())
            }
        })?;
        let status = response.status();
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Err(CallError::Refused(format!(
                "HTTP {status}: check the bearer token"
            )));
        }
        if !status.is_success() {
            return Err(CallError::Lost(format!("HTTP {status}")));
        }
        let answer: Value =
            serde_json::from_slice(&bounded_body(response).await.map_err(CallError::Lost)?)
                .map_err(|_| CallError::Lost("the answer is not JSON".into()))?;
        if let Some(error) = answer.get("error") {
            return Err(CallError::Refused(format!(
                "{} {}",
                error.get("code").unwrap_or(&Value::Null),
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            )));
        }
        answer
            .get("result")
            .cloned()
            .ok_or_else(|| CallError::Lost("an answer without result".into()))
    }
}

/// Calls one skill of one remote.
struct SkillHandler {
    remote: Arc<Remote>,
    skill: String,
    /// Whether the skill may change something (then a lost call is an uncertain outcome).
    mutation: bool,
    timeout: Duration,
}

#[async_trait]
impl ActionHandler for SkillHandler {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync, Mode::Async]),
            cancellable: !self.mutation,
            mutation: self.mutation,
            transactions: None,
        }
    }

    fn delegation_peer(&self) -> Option<&str> {
        Some(&self.remote.name)
    }

    fn delegation_identity(&self) -> Option<Value> {
        Some(self.remote.identity.clone())
    }

    /// The child of a parent whose outcome is unknown, found by its context (the derived child
    /// id): completed gives its output; failed, rejected or cancelled did not commit; running or
    /// waiting is asked again later; no task found (or a remote that cannot list) is no outcome
    /// yet, asked again until the runtime's follow-up gives up.
    async fn follow_child(
        &self,
        ctx: &TrustedContext,
        _input: &Value,
    ) -> Result<Reconciliation, HandlerError> {
        let (_, child_id) = aip_runtime::delegation::ids_of(&ctx.tenant, &ctx.action_id);
        let params = json!({ "contextId": child_id, "pageSize": 10, "includeArtifacts": true });
        let listed = self
            .remote
            .call("ListTasks", params, RPC_TIMEOUT)
            .await
            .map_err(|e| self.failure(e, None))?;
        let Some(task) = listed
            .get("tasks")
            .and_then(Value::as_array)
            .and_then(|t| t.first())
        else {
            return Err(self.protocol("the remote lists no task of this delegation"));
        };
        let state = task
            .pointer("/status/state")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Ok(match state {
            "TASK_STATE_COMPLETED" => Reconciliation::Committed {
                output: completed(task).output,
            },
            "TASK_STATE_FAILED" | "TASK_STATE_REJECTED" | "TASK_STATE_CANCELED" => {
                Reconciliation::NotCommitted
            }
            _ => Reconciliation::Pending {
                retry_after_ms: 5_000,
                cursor: None,
            },
        })
    }

    async fn invoke(
        &self,
        ctx: &TrustedContext,
        input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        let deadline = tokio::time::Instant::now() + self.timeout.min(ctx.remaining());
        let (delegation_id, child_id) =
            aip_runtime::delegation::ids_of(&ctx.tenant, &ctx.action_id);
        // The child's message id is derived from the parent: a remote that deduplicates by
        // messageId sees a re-run as the same message. So is its context, by which a child whose
        // outcome became unknown is found again (`follow_child`).
        let message = json!({
            "messageId": child_id, "contextId": child_id, "role": "ROLE_USER", "parts": [{ "data": input }],
            "metadata": { "skill": self.skill, "aip.capability_id": self.skill,
                          "aip.parent_action_id": ctx.action_id, "aip.delegation_id": delegation_id },
        });
        let params = json!({ "message": message, "configuration": { "returnImmediately": true } });
        let wait = RPC_TIMEOUT.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
        // Not raced with cancellation: the answer names the task a cancellation must reach
        // (with `returnImmediately` it comes at once, and the wait is bounded anyway).
        let sent = self.remote.call("SendMessage", params, wait).await;
        let mut task = match sent {
            Ok(result) => match (result.get("task"), result.get("message")) {
                (Some(task), _) => task.clone(),
                // A direct answer: the message is the result.
                (None, Some(message)) => return Ok(output_of(&[], message.get("parts"))),
                _ => return Err(self.protocol("SendMessage answered neither a task nor a message")),
            },
            Err(e) => return Err(self.failure(e, None)),
        };
        let task_id = task
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty() && id.len() <= 256)
            .ok_or_else(|| self.protocol("the remote task has no id"))?
            .to_owned();
        ctx.provider_operation
            .report(aip_core::ProviderOperationRef {
                provider: format!("a2a:{}", self.remote.name),
                operation_id: task_id.clone(),
                request_id: Some(child_id),
            });
        let mut pause = Duration::from_millis(100);
        loop {
            let state = task
                .pointer("/status/state")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if let Some(done) = self.settle(&state, &task) {
                return done;
            }
            if !self.mutation && ctx.cancellation.is_cancelled() {
                return self.cancel(&task_id).await;
            }
            let now = tokio::time::Instant::now();
            if now + pause >= deadline {
                return Err(self.unfinished(&task_id, &state).await);
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = ctx.cancellation.cancelled(), if !self.mutation => {
                    return self.cancel(&task_id).await;
                }
            }
            pause = (pause * 2).min(MAX_POLL);
            match self
                .remote
                .call(
                    "GetTask",
                    json!({ "id": task_id }),
                    RPC_TIMEOUT.min(deadline - now),
                )
                .await
            {
                Ok(read) => task = read,
                // A read that fails is retried until the deadline: the task runs on regardless.
                Err(CallError::NotSent(e) | CallError::Lost(e)) => {
                    tracing::warn!(remote = %self.remote.name, task = %task_id, error = %e, "GetTask failed; retrying");
                }
                Err(e) => return Err(self.failure(e, Some(&task_id))),
            }
        }
    }
}

impl SkillHandler {
    /// The outcome of a remote task in `state`, or `None` while it runs.
    fn settle(&self, state: &str, task: &Value) -> Option<Result<HandlerOutput, HandlerError>> {
        let said = || {
            task.pointer("/status/message/parts")
                .and_then(Value::as_array)
                .map(|parts| {
                    parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("\n")
                })
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| "no reason given".into())
        };
        let refused = |what: &str| {
            Some(Err(HandlerError::Failed {
                code: ErrorCode::ConnectorToolError.as_str().into(),
                message: format!(
                    "remote agent {}: the task {what}: {}",
                    self.remote.name,
                    said().chars().take(2048).collect::<String>()
                ),
                retryable: false,
            }))
        };
        match state {
            "TASK_STATE_COMPLETED" => Some(Ok(completed(task))),
            "TASK_STATE_FAILED" => refused("failed"),
            "TASK_STATE_REJECTED" => refused("was rejected"),
            "TASK_STATE_CANCELED" => refused("was cancelled by the remote"),
            // This node cannot give a remote agent more input or credentials mid-task.
            "TASK_STATE_INPUT_REQUIRED" => refused("needs input this node cannot give"),
            "TASK_STATE_AUTH_REQUIRED" => refused("needs authorization this node cannot give"),
            "TASK_STATE_SUBMITTED" | "TASK_STATE_WORKING" => None,
            other => Some(Err(self.protocol(&format!("unknown task state {other:?}")))),
        }
    }

    /// The parent was cancelled: ask the remote to cancel its task and report what it says.
    async fn cancel(&self, task_id: &str) -> Result<HandlerOutput, HandlerError> {
        match self
            .remote
            .call("CancelTask", json!({ "id": task_id }), RPC_TIMEOUT)
            .await
        {
            Ok(task)
                if task.pointer("/status/state").and_then(Value::as_str)
                    == Some("TASK_STATE_COMPLETED") =>
            {
                self.settle("TASK_STATE_COMPLETED", &task)
                    .unwrap_or(Err(HandlerError::Cancelled))
            }
            // Only a read skill is cancellable: whatever the remote did, nothing changed.
            _ => Err(HandlerError::Cancelled),
        }
    }

    /// The deadline came while the remote task ran: a read is cancelled there and timed out; a
    /// mutation's outcome is unknown.
    async fn unfinished(&self, task_id: &str, state: &str) -> HandlerError {
        if self.mutation {
            return HandlerError::UncertainOutcome(format!(
                "remote agent {} task {task_id} was still {state} at the deadline",
                self.remote.name
            ));
        }
        let _ = self
            .remote
            .call(
                "CancelTask",
                json!({ "id": task_id }),
                Duration::from_secs(5),
            )
            .await;
        HandlerError::DeadlineExceeded
    }

    fn protocol(&self, message: &str) -> HandlerError {
        HandlerError::Failed {
            code: ErrorCode::ConnectorProtocol.as_str().into(),
            message: format!("remote agent {}: {message}", self.remote.name),
            retryable: false,
        }
    }

    /// A failed call: not delivered is retryable; lost after sending, or any failure once the
    /// remote task `created` exists, is uncertain for a mutation (the remote may still act).
    fn failure(&self, error: CallError, created: Option<&str>) -> HandlerError {
        let name = &self.remote.name;
        if let (true, Some(task_id)) = (self.mutation, created) {
            let why = match error {
                CallError::NotSent(m) | CallError::Lost(m) | CallError::Refused(m) => m,
            };
            return HandlerError::UncertainOutcome(format!(
                "remote agent {name} task {task_id} could not be read: {why}"
            ));
        }
        match error {
            CallError::NotSent(m) => HandlerError::Failed {
                code: ErrorCode::ConnectorUnreachable.as_str().into(),
                message: format!("remote agent {name}: {m}"),
                retryable: true,
            },
            CallError::Lost(m) if self.mutation => {
                HandlerError::UncertainOutcome(format!("remote agent {name}: {m}"))
            }
            CallError::Lost(m) => HandlerError::Failed {
                code: ErrorCode::ConnectorFailed.as_str().into(),
                message: format!("remote agent {name}: {m}"),
                retryable: true,
            },
            CallError::Refused(m) => self.protocol(&format!("refused: {m}")),
        }
    }
}

/// A completed remote task's output (see [`output_of`]).
fn completed(task: &Value) -> HandlerOutput {
    let artifacts = task
        .get("artifacts")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    output_of(&artifacts, None)
}

/// A completed remote task as the action's output: its one `data` part when it has exactly one
/// (the common "structured answer"), else `{"artifacts": [...]}`; text parts become the result's
/// message.
fn output_of(artifacts: &[Value], message_parts: Option<&Value>) -> HandlerOutput {
    let parts: Vec<&Value> = artifacts
        .iter()
        .filter_map(|a| a.get("parts").and_then(Value::as_array))
        .flatten()
        .chain(
            message_parts
                .and_then(Value::as_array)
                .into_iter()
                .flatten(),
        )
        .collect();
    let data: Vec<&Value> = parts.iter().filter_map(|p| p.get("data")).collect();
    let output = match data.as_slice() {
        [one @ Value::Object(_)] => (*one).clone(),
        _ if artifacts.is_empty() => json!({ "parts": parts }),
        _ => json!({ "artifacts": artifacts }),
    };
    let message = parts
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .take(32)
        .map(|text| MessagePart::Text {
            text: text.chars().take(64 * 1024).collect(),
            format: None,
        })
        .collect();
    HandlerOutput { output, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completed_task_gives_its_one_data_part_or_all_its_artifacts() {
        let one =
            [json!({ "artifactId": "a", "parts": [{ "data": { "x": 1 } }, { "text": "done" }] })];
        let out = output_of(&one, None);
        assert_eq!(out.output, json!({ "x": 1 }));
        assert_eq!(out.message.len(), 1);
        let two = [
            json!({ "artifactId": "a", "parts": [{ "data": { "x": 1 } }] }),
            json!({ "artifactId": "b", "parts": [{ "data": { "y": 2 } }] }),
        ];
        assert_eq!(
            output_of(&two, None).output["artifacts"][1]["artifactId"],
            "b"
        );
        let direct = json!([{ "text": "hi" }]);
        assert_eq!(
            output_of(&[], Some(&direct)).output,
            json!({ "parts": [{ "text": "hi" }] })
        );
    }

    #[test]
    fn only_http_urls_have_an_origin() {
        assert_eq!(
            origin("https://a.example:8443/x").as_deref(),
            Some("https://a.example:8443")
        );
        assert_eq!(
            origin("http://127.0.0.1:9/").as_deref(),
            Some("http://127.0.0.1:9")
        );
        assert_eq!(origin("ftp://a.example"), None);
        assert_eq!(origin("not a url"), None);
    }
}
