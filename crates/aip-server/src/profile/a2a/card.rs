//! The agent card (A2A 1.0 `AgentCard`), built from the manifest: one skill per capability. The
//! public card lists only the capabilities configured as public; the extended card, for an
//! authenticated caller, every capability that caller may invoke. Capabilities are stated as
//! they are: streaming yes, push notifications no (not built), the extended card yes.

use std::sync::Arc;

use aip_core::Capability;
use axum::extract::Extension;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{A2aState, Call, PROTOCOL_VERSION};

/// A capability as an `AgentSkill`.
fn skill(capability: &Capability) -> Value {
    let mut tags = vec![json!(capability.kind.as_str())];
    if let Some(risk) = capability.risk {
        tags.push(json!(format!("risk:{}", risk.as_str())));
    }
    json!({
        "id": capability.id.as_str(),
        "name": capability.name,
        "description": capability.description.clone().unwrap_or_else(|| capability.name.clone()),
        "tags": tags,
        "inputModes": ["application/json", "text/plain"],
        "outputModes": ["application/json", "text/plain"],
    })
}

/// The card with `skills`, its interface at `base`.
fn card(state: &A2aState, base: &str, skills: Vec<Value>) -> Value {
    let (name, description) = &state.agent;
    json!({
        "name": name,
        "description": description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": format!("{}/a2a", base.trim_end_matches('/')),
            "protocolBinding": "JSONRPC",
            "protocolVersion": PROTOCOL_VERSION,
        }],
        "capabilities": { "streaming": true, "pushNotifications": state.push, "extendedAgentCard": true },
        "securitySchemes": { "bearer": { "httpAuthSecurityScheme": { "scheme": "Bearer" } } },
        "securityRequirements": [{ "schemes": { "bearer": { "list": [] } } }],
        "defaultInputModes": ["application/json", "text/plain"],
        "defaultOutputModes": ["application/json", "text/plain"],
        "skills": skills,
    })
}

/// Where clients reach this node: the configured public base URL, else the address the card was
/// asked for (the Host header, which the binding's guard has already checked).
fn base(state: &A2aState, headers: &HeaderMap) -> String {
    if let Some(base) = &state.config.public_base_url {
        return base.clone();
    }
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// `GET /.well-known/agent-card.json` (public).
pub async fn public(Extension(state): Extension<Arc<A2aState>>, headers: HeaderMap) -> Response {
    let skills = state
        .config
        .public_skills
        .iter()
        .filter_map(|id| state.capabilities.get(id))
        .map(skill)
        .collect();
    axum::Json(card(&state, &base(&state, &headers), skills)).into_response()
}

/// `GetExtendedAgentCard`: every capability the caller may invoke.
pub fn extended(call: &Call<'_>) -> Value {
    let skills = call
        .a2a
        .capabilities
        .values()
        .filter(|c| call.caller.may_invoke(c.id.as_str()))
        .map(skill)
        .collect();
    card(call.a2a, &base(call.a2a, call.headers), skills)
}
