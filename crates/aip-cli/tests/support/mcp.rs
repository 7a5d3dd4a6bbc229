//! A raw MCP Streamable HTTP client for the profile's tests: every header is the test's choice.

use std::path::Path;

use serde_json::{Value, json};

use super::{Server, token_file};

/// Alice's bearer token.
pub const ALICE: &str = "alice-token-0123456789abcdef";
/// Bob's bearer token.
pub const BOB: &str = "bob-token-0123456789abcdef0";

/// A server with two ordinary principals, alice and bob, who may invoke the demo capabilities.
pub fn two_principals(dir: &Path) -> Server {
    two_principals_with(dir, "")
}

/// [`two_principals`] with `extra` TOML (tables before the principals) in its configuration.
pub fn two_principals_with(dir: &Path, extra: &str) -> Server {
    let alice = token_file(dir, "alice.token", ALICE);
    let bob = token_file(dir, "bob.token", BOB);
    let config = dir.join("aip.toml");
    std::fs::write(
        &config,
        format!(
            r#"{extra}
[[principals]]
id = "alice"
kind = "agent"
tenant = "default"
scopes = ["invoke:cap:demo:*"]
token_file = "{alice}"

[[principals]]
id = "bob"
kind = "agent"
tenant = "default"
scopes = ["invoke:cap:demo:*"]
token_file = "{bob}"
"#,
            alice = alice.display(),
            bob = bob.display()
        ),
    )
    .unwrap();
    Server::start(&dir.join("data"), Some(&config), &[])
}

/// One MCP client connection: a principal's token and, once initialized, its session.
pub struct Mcp {
    pub url: String,
    pub token: Option<String>,
    pub session: Option<String>,
    pub version: Option<String>,
    pub http: reqwest::Client,
    next_id: u64,
}

/// What a POST answered.
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Mcp {
    pub fn new(base: &str, token: Option<&str>) -> Self {
        Self {
            url: format!("http://{base}/mcp"),
            token: token.map(str::to_owned),
            session: None,
            version: None,
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            next_id: 0,
        }
    }

    /// A request builder with auth, session and version headers as this client holds them.
    pub fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut r = self.http.request(method, &self.url);
        if let Some(t) = &self.token {
            r = r.bearer_auth(t);
        }
        if let Some(s) = &self.session {
            r = r.header("mcp-session-id", s);
        }
        if let Some(v) = &self.version {
            r = r.header("mcp-protocol-version", v);
        }
        r
    }

    /// POST a raw body with the standard Accept and Content-Type.
    pub async fn post_raw(&self, body: String) -> Answer {
        answer(self.post_streaming(body).await).await
    }

    /// POST a raw body as [`Mcp::post_raw`] does; the response unread, to follow an SSE answer.
    pub async fn post_streaming(&self, body: String) -> reqwest::Response {
        self.request(reqwest::Method::POST)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    /// `GET` with `Last-Event-ID: last`: the rest of a call's response stream, unread.
    pub async fn resume(&self, last: &str) -> reqwest::Response {
        self.request(reqwest::Method::GET)
            .header("accept", "text/event-stream")
            .header("last-event-id", last)
            .send()
            .await
            .unwrap()
    }

    /// A JSON-RPC request; returns the HTTP answer.
    pub async fn call(&mut self, method: &str, params: Value) -> Answer {
        self.next_id += 1;
        let body =
            json!({ "jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params });
        self.post_raw(body.to_string()).await
    }

    /// A JSON-RPC notification.
    pub async fn notify(&self, method: &str, params: Value) -> Answer {
        let body = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        self.post_raw(body.to_string()).await
    }

    /// `initialize` at `version` (no session or version header, as the SDKs send it), keeping the
    /// session id and the negotiated version; returns the result.
    pub async fn initialize(&mut self, version: &str) -> Value {
        self.session = None;
        self.version = None;
        let a = self
            .call(
                "initialize",
                json!({ "protocolVersion": version, "capabilities": {}, "clientInfo": { "name": "aip-test", "version": "1" } }),
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        self.session = Some(a.headers["mcp-session-id"].to_str().unwrap().to_owned());
        let result = a.body["result"].clone();
        self.version = Some(result["protocolVersion"].as_str().unwrap().to_owned());
        result
    }

    /// `initialize` then `notifications/initialized`.
    pub async fn open(&mut self, version: &str) -> Value {
        let result = self.initialize(version).await;
        let a = self.notify("notifications/initialized", json!({})).await;
        assert_eq!(a.status, 202, "{}", a.body);
        result
    }

    /// `tools/call`; returns the JSON-RPC result (panics on a JSON-RPC error).
    pub async fn tool(&mut self, name: &str, arguments: Value) -> Value {
        let a = self
            .call(
                "tools/call",
                json!({ "name": name, "arguments": arguments }),
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert!(a.body.get("error").is_none(), "{}", a.body);
        a.body["result"].clone()
    }

    /// DELETE the session.
    pub async fn delete(&self) -> u16 {
        self.request(reqwest::Method::DELETE)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

pub async fn answer(r: reqwest::Response) -> Answer {
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let text = r.text().await.unwrap();
    Answer {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::Null),
    }
}

/// A tool call over MCP is refused with a JSON-RPC error whose message starts with `code`.
pub async fn refused_over_mcp(mcp: &mut Mcp, code: &str) {
    let answer = mcp
        .call(
            "tools/call",
            json!({ "name": "demo_echo", "arguments": {} }),
        )
        .await;
    let message = answer.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with(code), "{}", answer.body);
}
