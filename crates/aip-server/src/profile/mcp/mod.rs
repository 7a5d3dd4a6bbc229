//! The MCP compatibility profile `aip.mcp.compat.v1` (spec 21.1) over Streamable HTTP at `/mcp`.
//!
//! An MCP session is a native session (durable, owned by the principal that opened it, visible to
//! every node on the store); each callable capability is one tool; `tools/call` is a native action
//! admitted exactly like one sent over HTTP. The legacy HTTP+SSE binding serves `2024-11-05` only.
//! The `aip_*` facade tools carry native semantics MCP has no object for; at 2025-11-25 queued
//! capabilities run as MCP tasks. Resources are the native resources under their read policy;
//! prompts are configured templates. `GET /mcp` opens a session's standalone stream, which carries
//! resource update notifications of its subscriptions; resource templates are served by read-only
//! capabilities; completions cover configured prompt arguments. Tools of upstream MCP servers
//! (`[[mcp_upstreams]]`, see `upstream`) are capabilities like any other. Their server-to-client
//! requests (`sampling/createMessage`, `elicitation/create`) are relayed to the client of the call
//! that runs the tool, on that call's response stream (see `relay`), when the client declared the
//! capability at `initialize` (elicitation from 2025-06-18 only); otherwise they are refused to the
//! upstream as "method not found". This server never originates sampling or elicitation itself.

pub mod content;
mod facade;
mod legacy;
pub mod oauth;
pub mod relay;
pub mod resources;
pub mod rpc;
mod standalone;
mod tasks;
pub mod templates;
mod tools;
mod transport;
pub mod upstream;

use std::sync::Arc;

use axum::Router;
use axum::routing::post;

pub use crate::config::mcp::McpConfig;
pub use tools::{ToolIndex, ToolNameError};

use crate::http::AppState;

/// Profile id (spec 21.1).
pub const PROFILE: &str = "aip.mcp.compat.v1";
/// Key of this project's metadata in MCP `_meta` objects (a reverse-domain name, spec 23.4).
pub const META_KEY: &str = "dev.aip/aip";
/// The `_meta` member a client sets to make a tool call idempotent under that key.
pub const IDEMPOTENCY_META: &str = "dev.aip/idempotency_key";

/// A stable MCP protocol version this profile speaks (spec 21.1), oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// `2024-11-05`: the HTTP+SSE era.
    V2024_11_05,
    /// `2025-03-26`: Streamable HTTP, batches, tool annotations, audio.
    V2025_03_26,
    /// `2025-06-18`: structured output, titles, `MCP-Protocol-Version` required after init.
    V2025_06_18,
    /// `2025-11-25`: tasks.
    V2025_11_25,
}

impl Version {
    /// Every supported version, newest first (the order `data.supported` lists them in).
    pub const SUPPORTED: [Version; 4] = [
        Version::V2025_11_25,
        Version::V2025_06_18,
        Version::V2025_03_26,
        Version::V2024_11_05,
    ];
    /// What a client asking for an unknown version is offered (spec 23.3: only mutual versions).
    pub const LATEST: Version = Version::V2025_11_25;

    /// The version named `s`, if supported.
    pub fn parse(s: &str) -> Option<Self> {
        Self::SUPPORTED.into_iter().find(|v| v.as_str() == s)
    }

    /// Wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V2024_11_05 => "2024-11-05",
            Version::V2025_03_26 => "2025-03-26",
            Version::V2025_06_18 => "2025-06-18",
            Version::V2025_11_25 => "2025-11-25",
        }
    }
}

/// What the MCP endpoint needs besides the shared [`AppState`].
pub struct McpState {
    pub(crate) tools: ToolIndex,
    pub(crate) calls: tools::InFlight,
    /// Open legacy SSE streams on this node.
    pub(crate) legacy: legacy::Streams,
    /// Longest a `tools/call` waits for a queued action (the deployment's action timeout bound).
    pub(crate) max_call_wait_ms: u64,
    /// Configured prompt templates.
    pub(crate) prompts: Vec<resources::PromptConfig>,
    /// Resource templates, checked against the capabilities.
    pub(crate) templates: Vec<templates::Template>,
    /// Open standalone `GET /mcp` streams on this node, per session.
    pub(crate) standalone: standalone::Standalone,
    /// Resource subscriptions on this node, per session.
    pub(crate) subscriptions: standalone::Subscriptions,
    /// The log level each session set (`logging/setLevel`), on this node.
    pub(crate) log_levels: LogLevels,
    /// Upstream tools' requests for the calling client (sampling, elicitation).
    pub(crate) relay: Arc<relay::Relay>,
}

/// Sessions' minimum log severities (0 `debug` .. 7 `emergency`), bounded: past the bound an
/// arbitrary entry makes room (that session then hears no logs until it sets a level again).
#[derive(Default)]
pub struct LogLevels(std::sync::Mutex<std::collections::HashMap<String, u8>>);

/// Most sessions whose log level one node keeps.
const MAX_LOG_LEVELS: usize = 100_000;

/// The MCP log levels, by severity.
pub(crate) const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

impl LogLevels {
    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, u8>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets `session`'s minimum severity.
    pub fn set(&self, session: &str, severity: u8) {
        let mut map = self.map();
        if map.len() >= MAX_LOG_LEVELS
            && !map.contains_key(session)
            && let Some(any) = map.keys().next().cloned()
        {
            map.remove(&any);
        }
        map.insert(session.to_owned(), severity);
    }

    /// `session`'s minimum severity, when it set one.
    pub fn get(&self, session: &str) -> Option<u8> {
        self.map().get(session).copied()
    }

    /// Forgets `session`.
    pub fn remove(&self, session: &str) {
        self.map().remove(session);
    }
}

impl McpState {
    /// The profile's state over `tools` (built with [`ToolIndex::build`] when the capabilities
    /// are admitted, so a bad tool name stops startup before anything runs).
    pub fn new(
        tools: ToolIndex,
        max_call_wait_ms: u64,
        prompts: Vec<resources::PromptConfig>,
        templates: Vec<templates::Template>,
        relay: Arc<relay::Relay>,
    ) -> Self {
        Self {
            tools,
            calls: tools::InFlight::default(),
            legacy: legacy::Streams::default(),
            max_call_wait_ms,
            prompts,
            templates,
            standalone: standalone::Standalone::default(),
            subscriptions: standalone::Subscriptions::default(),
            log_levels: LogLevels::default(),
            relay,
        }
    }
}

/// Whether `path` is one of the MCP endpoint's.
pub fn is_mcp_path(path: &str) -> bool {
    path == "/mcp" || path.starts_with("/mcp/") || path == "/aip/v1/mcp"
}

/// The 401 (no or invalid token) or 403 (missing scope) of the OAuth mode, naming the resource
/// metadata (RFC 9728 section 5.1, RFC 6750 section 3).
pub fn challenge(
    oauth: &oauth::OAuth,
    refusal: Option<oauth::Refusal>,
) -> axum::response::Response {
    use aip_core::ErrorCode;
    use axum::http::{HeaderValue, header};
    use axum::response::IntoResponse;
    let metadata = oauth.metadata_url();
    let (error, value) = match refusal {
        None => (
            crate::error::ApiError::unauthenticated(),
            format!("Bearer resource_metadata=\"{metadata}\""),
        ),
        Some(oauth::Refusal::Invalid(why)) => (
            crate::error::ApiError::new(ErrorCode::Unauthenticated, why),
            format!("Bearer error=\"invalid_token\", resource_metadata=\"{metadata}\""),
        ),
        Some(oauth::Refusal::InsufficientScope(scope)) => (
            crate::error::ApiError::with_status(
                axum::http::StatusCode::FORBIDDEN,
                ErrorCode::ScopeDenied,
                format!("the token lacks the scope {scope}"),
            ),
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"{scope}\", resource_metadata=\"{metadata}\""
            ),
        ),
    };
    let mut response = error.into_response();
    if let Ok(value) = HeaderValue::from_str(&value) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// Public routes of the OAuth mode: RFC 9728 metadata at the well-known paths.
pub fn public_routes(oauth: Option<Arc<oauth::OAuth>>) -> Router<AppState> {
    let Some(oauth) = oauth else {
        return Router::new();
    };
    let metadata = move || {
        let body = oauth.metadata();
        async move { axum::Json(body) }
    };
    Router::new()
        .route(
            "/.well-known/oauth-protected-resource",
            axum::routing::get(metadata.clone()),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            axum::routing::get(metadata),
        )
}

/// The MCP routes (behind bearer authentication and the Host/Origin guard of the HTTP binding).
pub fn routes(state: Arc<McpState>) -> Router<AppState> {
    let endpoint = post(transport::post)
        .get(transport::get)
        .delete(transport::delete);
    Router::new()
        .route("/mcp", endpoint.clone())
        .route("/mcp/v1", endpoint.clone())
        .route("/aip/v1/mcp", endpoint)
        .route("/mcp/legacy/sse", axum::routing::get(legacy::open))
        .route("/mcp/legacy/messages", post(legacy::message))
        .layer(axum::Extension(state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_four_stable_versions_parse() {
        for v in Version::SUPPORTED {
            assert_eq!(Version::parse(v.as_str()), Some(v));
        }
        for other in [
            "2026-07-28",
            "1999-01-01",
            "not-a-version",
            "",
            "2025-11-25 ",
        ] {
            assert_eq!(Version::parse(other), None, "{other}");
        }
        assert!(Version::V2024_11_05 < Version::V2025_11_25);
    }
}
