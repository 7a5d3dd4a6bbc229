//! The rmcp baseline of `mcp_load`: a minimal MCP server built with the official Rust
//! SDK (`rmcp`, its Streamable HTTP server on axum), whose `demo_echo` tool does what a durable
//! echo minimally must: one SQLite insert (WAL, `synchronous = FULL`, as `aip serve`'s store)
//! before answering. No admission, receipts, events or read model: the cost of the protocol and
//! one durable write, to put AIP's governed `tools/call` in perspective.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Map, Value};

#[derive(Clone)]
struct Echo {
    db: Arc<Mutex<rusqlite::Connection>>,
}

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut schema = Map::new();
        schema.insert("type".into(), Value::String("object".into()));
        Ok(ListToolsResult {
            tools: vec![Tool::new("demo_echo", "Echoes its input", schema)],
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let input = Value::Object(request.arguments.unwrap_or_default()).to_string();
        let db = self.db.clone();
        let stored = input.clone();
        tokio::task::spawn_blocking(move || {
            db.lock()
                .unwrap()
                .execute("INSERT INTO calls (input) VALUES (?1)", [stored])
        })
        .await
        .unwrap()
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text(input)]).into())
    }
}

/// Starts the server on a loopback port with its database in `dir`; its MCP URL.
pub async fn start(dir: &std::path::Path) -> String {
    let db = rusqlite::Connection::open(dir.join("rmcp.sqlite")).unwrap();
    db.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
         CREATE TABLE calls (seq INTEGER PRIMARY KEY, input TEXT NOT NULL);",
    )
    .unwrap();
    let echo = Echo {
        db: Arc::new(Mutex::new(db)),
    };
    let service = StreamableHttpService::new(
        move || Ok(echo.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default().with_json_response(true),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Small answers go out at once (as `aip serve` sends them).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}/mcp")
}
