//! The facade tools (notes 6.4): native semantics no MCP object carries (status, results, events,
//! cancellation, sessions, approvals, callbacks, transactions, receipts, audit, resources,
//! delegation) as `aip_*` tools. Each one builds the native request message from its arguments and
//! hands it to the runtime's one envelope entry point, so authorization, validation and answers are
//! exactly the native message's. Unknown arguments are refused, never ignored.

use std::sync::Arc;

use aip_core::{ErrorCategory, MessageBody, MessageType};
use aip_runtime::{Accept, Caller, Runtime};
use serde_json::{Map, Value, json};

use super::Version;
use super::rpc::INVALID_PARAMS;
use super::tools::CallOutcome;

/// JSON-RPC error answering a facade call the caller is not authorized for (notes 6.4: authorization
/// failures are protocol errors, capability failures are tool results).
pub const FORBIDDEN: i64 = -32003;

/// How a facade tool turns its arguments into the native request body.
#[derive(Clone, Copy)]
enum Build {
    /// The arguments are the body, as they are.
    Same,
    /// `aip_call`: an `Action`.
    Action,
    /// `aip_action_cancel`: `{target: {action}, reason}`.
    Cancel,
    /// `aip_events` / `aip_action_events`: `kind` joins `kinds`.
    Kinds,
    /// `aip_capabilities`: a manifest request; paging and trimming happen on the answer.
    Manifest,
    /// `aip_approval_decide`: the decision, by the authenticated principal only.
    Decide,
    /// `aip_delegate`: a delegation request naming its child action.
    Delegate,
}

/// One facade tool.
pub struct Facade {
    /// Tool name.
    pub name: &'static str,
    /// Dotted alias, also accepted as a name (`aip.call`).
    pub title: &'static str,
    description: &'static str,
    message_type: MessageType,
    read_only: bool,
    /// Argument names and their JSON Schemas (as JSON text).
    properties: &'static [(&'static str, &'static str)],
    required: &'static [&'static str],
    build: Build,
}

const S: &str = r#"{"type":"string"}"#;
const B: &str = r#"{"type":"boolean"}"#;
const N: &str = r#"{"type":"integer","minimum":0}"#;
const O: &str = r#"{"type":"object"}"#;
const A: &str = r#"{"type":"array"}"#;
const WAIT: &str = r#"{"type":"integer","minimum":0,"maximum":30000}"#;
const KINDS: &str = r#"{"type":"array","items":{"type":"string"}}"#;

/// Every facade tool, in listing order.
pub static FACADE: &[Facade] = &[
    Facade {
        name: "aip_capabilities",
        title: "aip.capabilities",
        description: "The capabilities you may invoke (the manifest), each with its MCP tool name.",
        message_type: MessageType::ManifestRequest,
        read_only: true,
        properties: &[
            ("capability_id", S),
            ("profile", S),
            ("query", S),
            ("include_schemas", B),
            ("include_contracts", B),
            ("include_bindings", B),
            ("cursor", S),
            ("limit", r#"{"type":"integer","minimum":1,"maximum":1000}"#),
        ],
        required: &[],
        build: Build::Manifest,
    },
    Facade {
        name: "aip_call",
        title: "aip.call",
        description: "Invoke a capability as a native AIP action with every native context (mode, idempotency key, callback, approval, transaction...).",
        message_type: MessageType::Action,
        read_only: false,
        properties: &[
            ("capability_id", S),
            ("input", "{}"),
            ("action_id", S),
            (
                "mode",
                r#"{"type":"string","enum":["sync","async","streaming"]}"#,
            ),
            ("idempotency_key", S),
            ("timeout_ms", N),
            ("conversation", O),
            ("memory_context", "{}"),
            ("delegation_chain", A),
            ("federation", O),
            ("callback", O),
            ("observability", O),
            ("compliance", O),
            ("approval", O),
            ("transaction", O),
            ("identity", O),
            ("context", O),
        ],
        required: &["capability_id"],
        build: Build::Action,
    },
    Facade {
        name: "aip_events",
        title: "aip.events",
        description: "The event feed you may read, after a cursor.",
        message_type: MessageType::EventStreamRequest,
        read_only: true,
        properties: &[("cursor", S), ("limit", N), ("kinds", KINDS), ("kind", S)],
        required: &[],
        build: Build::Kinds,
    },
    Facade {
        name: "aip_action_status",
        title: "aip.action_status",
        description: "An action's lifecycle state, optionally with its result, receipts and chunks.",
        message_type: MessageType::ActionStatusRequest,
        read_only: true,
        properties: &[
            ("action_id", S),
            ("include_result", B),
            ("include_receipts", B),
            ("include_chunks", B),
            ("wait_ms", WAIT),
            ("tenant_id", S),
        ],
        required: &["action_id"],
        build: Build::Same,
    },
    Facade {
        name: "aip_action_result",
        title: "aip.action_result",
        description: "An action's final result (waits up to wait_ms).",
        message_type: MessageType::ActionResultRequest,
        read_only: true,
        properties: &[
            ("action_id", S),
            ("wait_ms", WAIT),
            ("include_receipt", B),
            ("include_terminal_events", B),
            ("tenant_id", S),
        ],
        required: &["action_id"],
        build: Build::Same,
    },
    Facade {
        name: "aip_action_list",
        title: "aip.action_list",
        description: "Actions you may read, filtered.",
        message_type: MessageType::ActionListRequest,
        read_only: true,
        properties: &[
            ("state", S),
            ("capability_id", S),
            ("session_id", S),
            ("principal_id", S),
            ("approval_id", S),
            ("transaction_id", S),
            ("tenant_id", S),
            ("cursor", S),
            ("limit", N),
            ("include_results", B),
            ("include_receipts", B),
        ],
        required: &[],
        build: Build::Same,
    },
    Facade {
        name: "aip_action_events",
        title: "aip.action_events",
        description: "An action's events after a cursor.",
        message_type: MessageType::ActionEventsRequest,
        read_only: true,
        properties: &[
            ("action_id", S),
            ("cursor", S),
            ("limit", N),
            ("kinds", KINDS),
            ("kind", S),
            ("include_chunks", B),
            ("tenant_id", S),
        ],
        required: &["action_id"],
        build: Build::Kinds,
    },
    Facade {
        name: "aip_action_cancel",
        title: "aip.action_cancel",
        description: "Request cancellation of an action.",
        message_type: MessageType::Cancel,
        read_only: false,
        properties: &[("action_id", S), ("reason", S)],
        required: &["action_id"],
        build: Build::Cancel,
    },
    Facade {
        name: "aip_session_get",
        title: "aip.session_get",
        description: "A session you may read.",
        message_type: MessageType::SessionRequest,
        read_only: true,
        properties: &[("session_id", S)],
        required: &["session_id"],
        build: Build::Same,
    },
    Facade {
        name: "aip_session_list",
        title: "aip.session_list",
        description: "Sessions you may read.",
        message_type: MessageType::SessionListRequest,
        read_only: true,
        properties: &[
            ("principal_id", S),
            ("status", S),
            ("cursor", S),
            ("limit", N),
        ],
        required: &[],
        build: Build::Same,
    },
    Facade {
        name: "aip_session_close",
        title: "aip.session_close",
        description: "Close a session (its admitted actions run on).",
        message_type: MessageType::SessionCloseRequest,
        read_only: false,
        properties: &[("session_id", S), ("reason", S)],
        required: &["session_id"],
        build: Build::Same,
    },
    Facade {
        name: "aip_session_resume",
        title: "aip.session_resume",
        description: "Resume a session with its single-use resume token.",
        message_type: MessageType::SessionResumeRequest,
        read_only: false,
        properties: &[
            ("session_id", S),
            ("resume_token", S),
            ("last_event_cursor", S),
        ],
        required: &["session_id"],
        build: Build::Same,
    },
    Facade {
        name: "aip_approval_get",
        title: "aip.approval_get",
        description: "An approval request you may read, with its decisions.",
        message_type: MessageType::ApprovalQueryRequest,
        read_only: true,
        properties: &[
            ("approval_id", S),
            ("include_action_status", B),
            ("include_receipts", B),
            ("include_evidence_payload", B),
            ("tenant_id", S),
        ],
        required: &["approval_id"],
        build: Build::Same,
    },
    Facade {
        name: "aip_approval_list",
        title: "aip.approval_list",
        description: "Approval requests you may read (your inbox with approver = you).",
        message_type: MessageType::ApprovalListRequest,
        read_only: true,
        properties: &[
            ("status", S),
            ("approver", S),
            ("requester", S),
            ("tenant_id", S),
            ("cursor", S),
            ("limit", N),
            ("include_action_status", B),
            ("include_receipts", B),
        ],
        required: &[],
        build: Build::Same,
    },
    Facade {
        name: "aip_approval_decide",
        title: "aip.approval_decide",
        description: "Decide an approval as the authenticated principal (approve, deny, revoke).",
        message_type: MessageType::ApprovalDecision,
        read_only: false,
        properties: &[
            ("approval_id", S),
            (
                "decision",
                r#"{"type":"string","enum":["approved","granted","approve","grant","denied","deny","expired","revoked","revoke"]}"#,
            ),
            ("approver_principal", S),
            ("reason", S),
            ("decision_id", S),
            ("policy_hash", S),
            ("target_decision_id", S),
            ("constraints", A),
            ("evidence", A),
        ],
        required: &["approval_id", "decision"],
        build: Build::Decide,
    },
    Facade {
        name: "aip_callback_delivery_get",
        title: "aip.callback_delivery_get",
        description: "A callback delivery record.",
        message_type: MessageType::CallbackDeliveryQueryRequest,
        read_only: true,
        properties: &[
            ("delivery_id", S),
            ("tenant_id", S),
            ("include_receipts", B),
        ],
        required: &["delivery_id"],
        build: Build::Same,
    },
    Facade {
        name: "aip_callback_delivery_list",
        title: "aip.callback_delivery_list",
        description: "Callback deliveries you may read.",
        message_type: MessageType::CallbackDeliveryListRequest,
        read_only: true,
        properties: &[
            ("action_id", S),
            ("status", S),
            ("profile", S),
            ("target", S),
            ("tenant_id", S),
            ("cursor", S),
            ("limit", N),
            ("include_receipts", B),
        ],
        required: &[],
        build: Build::Same,
    },
    Facade {
        name: "aip_transaction_get",
        title: "aip.transaction_get",
        description: "A transaction by transaction, plan or action id.",
        message_type: MessageType::TransactionQueryRequest,
        read_only: true,
        properties: &[
            ("transaction_id", S),
            ("plan_id", S),
            ("action_id", S),
            ("include_result", B),
            ("include_receipts", B),
            ("tenant_id", S),
        ],
        required: &[],
        build: Build::Same,
    },
    Facade {
        name: "aip_receipt_get",
        title: "aip.receipt_get",
        description: "A receipt chain (by chain id) or one receipt.",
        message_type: MessageType::ReceiptQueryRequest,
        read_only: true,
        properties: &[("chain_id", S), ("receipt_id", S)],
        required: &[],
        build: Build::Same,
    },
    Facade {
        name: "aip_audit_events",
        title: "aip.audit_events",
        description: "Audit events you may read; export mode needs its own scope.",
        message_type: MessageType::AuditQueryRequest,
        read_only: true,
        properties: &[
            ("action_id", S),
            ("session_id", S),
            ("principal_id", S),
            ("transaction_id", S),
            ("from", S),
            ("to", S),
            ("cursor", S),
            ("limit", N),
            ("include_receipts", B),
            ("export", B),
            ("tenant_id", S),
        ],
        required: &[],
        build: Build::Same,
    },
    Facade {
        name: "aip_resource_list",
        title: "aip.resource_list",
        description: "Resources you may list.",
        message_type: MessageType::ResourceListRequest,
        read_only: true,
        properties: &[
            ("capability_id", S),
            ("kind", S),
            ("cursor", S),
            ("limit", N),
            ("tenant_id", S),
        ],
        required: &[],
        build: Build::Same,
    },
    Facade {
        name: "aip_resource_read",
        title: "aip.resource_read",
        description: "Read a resource you may read.",
        message_type: MessageType::ResourceReadRequest,
        read_only: true,
        properties: &[
            ("resource_id", S),
            ("version", S),
            ("accept", "{}"),
            ("tenant_id", S),
        ],
        required: &["resource_id"],
        build: Build::Same,
    },
    Facade {
        name: "aip_delegate",
        title: "aip.delegate",
        description: "Send a native delegation request (accepted only from configured peers).",
        message_type: MessageType::DelegationRequest,
        read_only: false,
        properties: &[
            ("delegate_id", S),
            ("scope", KINDS),
            ("capability_id", S),
            ("delegation_id", S),
            ("parent_action_id", S),
            ("input", "{}"),
            ("action_id", S),
            ("idempotency_key", S),
            ("mode", S),
            ("timeout_ms", N),
            ("metadata", O),
        ],
        required: &["delegate_id", "scope", "capability_id"],
        build: Build::Delegate,
    },
];

/// The facade tool called `name` (or its dotted alias).
pub fn find(name: &str) -> Option<&'static Facade> {
    FACADE.iter().find(|f| f.name == name || f.title == name)
}

/// The facade's `Tool`s at `version`, built once (their schemas are constants).
pub fn described(version: Version) -> &'static [Value] {
    static DESCRIBED: std::sync::LazyLock<Vec<(Version, Vec<Value>)>> =
        std::sync::LazyLock::new(|| {
            Version::SUPPORTED
                .iter()
                .map(|v| (*v, FACADE.iter().map(|f| describe(f, *v)).collect()))
                .collect()
        });
    DESCRIBED
        .iter()
        .find(|(v, _)| *v == version)
        .map_or(&[], |(_, tools)| tools.as_slice())
}

/// The MCP `Tool` of a facade tool at `version`.
pub fn describe(f: &Facade, version: Version) -> Value {
    let properties: Map<String, Value> = f
        .properties
        .iter()
        .map(|(name, schema)| {
            let schema = serde_json::from_str(schema).unwrap_or_else(|_| json!({}));
            ((*name).to_owned(), schema)
        })
        .collect();
    let mut tool = json!({
        "name": f.name,
        "description": f.description,
        "inputSchema": { "type": "object", "properties": properties, "required": f.required, "additionalProperties": false },
    });
    if version >= Version::V2025_03_26 {
        tool["annotations"] = json!({ "readOnlyHint": f.read_only, "destructiveHint": false, "openWorldHint": false });
    }
    if version >= Version::V2025_06_18 {
        tool["title"] = json!(f.title);
        tool["outputSchema"] = json!({ "type": "object" });
    }
    if version >= Version::V2025_11_25 {
        tool["execution"] = json!({ "taskSupport": "forbidden" });
    }
    tool
}

/// Runs a facade tool for `caller` through the runtime's envelope entry point.
pub async fn call(
    runtime: &Arc<Runtime>,
    tools: &super::ToolIndex,
    f: &Facade,
    caller: &Caller,
    version: Version,
    args: Map<String, Value>,
) -> CallOutcome {
    let invalid = |m: String| Err((INVALID_PARAMS, m));
    if let Some(unknown) = args
        .keys()
        .find(|k| !f.properties.iter().any(|(p, _)| p == k))
    {
        return invalid(format!("{}: unknown argument {unknown}", f.name));
    }
    if let Some(missing) = f.required.iter().find(|r| !args.contains_key(**r)) {
        return invalid(format!("{}: missing argument {missing}", f.name));
    }
    let payload = match build(f.build, caller, &args) {
        Ok(payload) => payload,
        Err(outcome) => return outcome,
    };
    let envelope = json!({
        "aip_version": "1.0",
        "message_type": f.message_type.as_str(),
        "message_id": aip_core::MessageId::generate(),
        "sent_at": aip_core::Timestamp::now(),
        "body": { f.message_type.body_key(): payload },
    });
    let reply = runtime
        .handle(caller, envelope.to_string().as_bytes(), Accept::AnyMessage)
        .await;
    let message_type = reply.envelope.message_type.as_str();
    let mut body = serde_json::to_value(&reply.envelope.body).unwrap_or(Value::Null);
    if let MessageBody::Error(e) = &reply.envelope.body {
        if e.error.category == ErrorCategory::Auth {
            return Err((
                FORBIDDEN,
                format!("{}: {}", e.error.code.as_str(), e.error.message),
            ));
        }
        let text = format!("{}: {}", e.error.code, e.error.message);
        return Ok(answer(
            version,
            true,
            &text,
            json!({ "message_type": message_type, "body": body }),
        ));
    }
    if matches!(f.build, Build::Manifest) {
        body = page_manifest(body, &args, tools);
    }
    let structured = json!({ "message_type": message_type, "body": body });
    Ok(answer(version, false, &structured.to_string(), structured))
}

/// A facade answer: the structured reply (from 2025-06-18), and always as text.
fn answer(version: Version, is_error: bool, text: &str, structured: Value) -> Value {
    let mut result = json!({ "content": [{ "type": "text", "text": text }], "isError": is_error });
    if version >= Version::V2025_06_18 {
        result["structuredContent"] = structured;
    } else if is_error && let Some(content) = result["content"].as_array_mut() {
        content.push(json!({ "type": "text", "text": structured.to_string() }));
    }
    result
}

fn build(kind: Build, caller: &Caller, args: &Map<String, Value>) -> Result<Value, CallOutcome> {
    let invalid = |m: &str| Err(Err((INVALID_PARAMS, m.to_owned())));
    let mut body = args.clone();
    match kind {
        Build::Same => {}
        Build::Kinds => {
            if let Some(kind) = body.remove("kind") {
                let kinds = body.entry("kinds").or_insert_with(|| json!([]));
                match kinds.as_array_mut() {
                    Some(list) => list.push(kind),
                    None => return invalid("kinds must be an array"),
                }
            }
        }
        Build::Cancel => {
            let action = body.remove("action_id").unwrap_or(Value::Null);
            body.insert("target".into(), json!({ "action": action }));
        }
        Build::Manifest => {
            let mut request = Map::new();
            if let Some(profile) = body.get("profile") {
                request.insert("profiles".into(), json!([profile]));
            }
            if let Some(id) = body.get("capability_id") {
                request.insert("filter".into(), json!({ "capability_ids": [id] }));
            }
            return Ok(Value::Object(request));
        }
        Build::Action => return action(caller, body).map_err(Err),
        Build::Decide => {
            if let Some(claimed) = body.remove("approver_principal")
                && claimed.as_str() != Some(caller.id.as_str())
            {
                return Err(Err((
                    FORBIDDEN,
                    "approver_principal must match the principal authenticated by the MCP transport".into(),
                )));
            }
            let decision = match body.get("decision").and_then(Value::as_str) {
                Some("approved" | "granted" | "approve" | "grant") => "approved",
                Some("denied" | "deny") => "denied",
                Some("expired") => "expired",
                Some("revoked" | "revoke") => "revoked",
                _ => return invalid("decision must be approve, deny, expired or revoke"),
            };
            body.insert("decision".into(), json!(decision));
            body.insert(
                "approver".into(),
                json!({ "id": caller.id, "kind": caller.kind }),
            );
            body.insert("decided_at".into(), json!(aip_core::Timestamp::now()));
        }
        Build::Delegate => {
            let keyed = keyed_id(caller, &body);
            let mut child = Map::new();
            child.insert(
                "id".into(),
                body.remove("action_id").unwrap_or_else(|| {
                    json!(
                        keyed
                            .clone()
                            .unwrap_or_else(|| aip_core::ActionId::generate().as_str().to_owned())
                    )
                }),
            );
            for key in [
                "capability_id",
                "input",
                "idempotency_key",
                "mode",
                "timeout_ms",
            ] {
                if let Some(v) = body.remove(key) {
                    child.insert(key.into(), v);
                }
            }
            child.entry("input").or_insert_with(|| json!({}));
            let delegate = body.remove("delegate_id").unwrap_or(Value::Null);
            body.insert(
                "delegate".into(),
                json!({ "id": delegate, "kind": "agent" }),
            );
            body.insert(
                "requested_by".into(),
                json!({ "id": caller.id, "kind": caller.kind }),
            );
            body.insert("child_action".into(), Value::Object(child));
            // A keyed delegation retried is the same request: its ids follow from the key too.
            body.entry("delegation_id").or_insert_with(|| match &keyed {
                Some(id) => json!(format!("dlg_{id}")),
                None => json!(aip_core::generate_with_prefix("dlg_")),
            });
            body.entry("parent_action_id")
                .or_insert_with(|| match &keyed {
                    Some(id) => json!(format!("{id}_parent")),
                    None => json!(aip_core::ActionId::generate()),
                });
            if let Some(Value::String(scope)) = body.get("scope").cloned() {
                body.insert("scope".into(), json!([scope]));
            }
        }
    }
    Ok(Value::Object(body))
}

/// The action id of a call keyed by `idempotency_key` without an `action_id`: derived from
/// (tenant, principal, capability, key) exactly as a keyed `tools/call`, so a retry from a new MCP
/// session or node is an identical re-send answered by the original outcome under every collision
/// behaviour, and the same key with other input is a conflict (spec 9.5).
fn keyed_id(caller: &Caller, body: &Map<String, Value>) -> Option<String> {
    let key = body.get("idempotency_key").and_then(Value::as_str)?;
    let capability = body.get("capability_id").and_then(Value::as_str)?;
    (!body.contains_key("action_id"))
        .then(|| super::tools::derive_id(&[&caller.tenant, &caller.id, capability, key]))
}

/// `aip_call`'s arguments as an `Action` (the nested `context` may carry the context members).
fn action(caller: &Caller, mut body: Map<String, Value>) -> Result<Value, (i64, String)> {
    if let Some(context) = body.remove("context") {
        let Value::Object(context) = context else {
            return Err((INVALID_PARAMS, "context must be an object".into()));
        };
        for (k, v) in context {
            if body.contains_key(&k) {
                return Err((
                    INVALID_PARAMS,
                    format!("{k} is given twice (argument and context)"),
                ));
            }
            body.insert(k, v);
        }
    }
    let id = match keyed_id(caller, &body) {
        Some(derived) => json!(derived),
        None => body
            .remove("action_id")
            .unwrap_or_else(|| json!(aip_core::ActionId::generate())),
    };
    body.insert("id".into(), id);
    body.entry("input").or_insert_with(|| json!({}));
    Ok(Value::Object(body))
}

/// The manifest answer trimmed and paged as `aip_capabilities` asked, each capability with its tool.
fn page_manifest(mut body: Value, args: &Map<String, Value>, tools: &super::ToolIndex) -> Value {
    let flag = |k: &str| args.get(k).and_then(Value::as_bool).unwrap_or(true);
    let query = args
        .get("query")
        .and_then(Value::as_str)
        .map(str::to_lowercase);
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(100)
        .clamp(1, 1000) as usize;
    let offset = args
        .get("cursor")
        .and_then(Value::as_str)
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(0);
    let Some(manifest) = body.get_mut("manifest").and_then(Value::as_object_mut) else {
        return body;
    };
    let all = manifest
        .remove("capabilities")
        .and_then(|c| match c {
            Value::Array(list) => Some(list),
            _ => None,
        })
        .unwrap_or_default();
    let matching: Vec<Value> = all
        .into_iter()
        .filter(|c| {
            query.as_ref().is_none_or(|q| {
                ["id", "name", "description"].iter().any(|k| {
                    c.get(*k)
                        .and_then(Value::as_str)
                        .is_some_and(|s| s.to_lowercase().contains(q))
                })
            })
        })
        .collect();
    let total = matching.len();
    let page: Vec<Value> = matching
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|mut c| {
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .map(aip_core::CapabilityId::new);
            if let Some(object) = c.as_object_mut() {
                if !flag("include_schemas") {
                    object.remove("input_schema");
                    object.remove("output_schema");
                }
                if !flag("include_contracts") {
                    object.remove("contract");
                }
                if !flag("include_bindings") {
                    object.remove("bindings");
                }
                let name = id.as_ref().and_then(|id| tools.name_of(id));
                object.insert("mcp_tool_name".into(), json!(name));
            }
            c
        })
        .collect();
    let next = (offset + page.len() < total).then(|| (offset + page.len()).to_string());
    manifest.insert("capabilities".into(), Value::Array(page));
    manifest.insert("total".into(), json!(total));
    manifest.insert("next_cursor".into(), json!(next));
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_facade_has_23_valid_uniquely_named_tools_with_object_schemas() {
        assert_eq!(FACADE.len(), 23);
        let mut names: Vec<&str> = FACADE.iter().map(|f| f.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 23);
        for f in FACADE {
            assert!(f.name.starts_with("aip_") && f.name.len() <= 128);
            let tool = describe(f, Version::V2025_11_25);
            assert_eq!(tool["inputSchema"]["type"], "object");
            for (name, schema) in f.properties {
                assert!(
                    serde_json::from_str::<Value>(schema).is_ok(),
                    "{}.{name}",
                    f.name
                );
            }
            for r in f.required {
                assert!(f.properties.iter().any(|(p, _)| p == r), "{}: {r}", f.name);
            }
            assert_eq!(find(f.title).map(|t| t.name), Some(f.name));
        }
    }
}
