//! A runtime over a fresh SQLite store, driven through its binding-independent entry point.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aip_runtime::handler::demo::demo_capabilities;
use aip_runtime::registry::agent_principal;
use aip_runtime::{
    Accept, ActionHandler, Caller, HandlerError, HandlerOutput, HandlerSupport, Mode, Registry,
    Runtime, RuntimeConfig, SignaturePolicy, TrustedContext,
};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The runtime, its store directory and the release switch of the stubborn handler.
pub struct Harness {
    pub runtime: Arc<Runtime>,
    pub release: Arc<Notify>,
    _dir: tempfile::TempDir,
}

/// `cap:t:stubborn`: runs until released and cannot be cancelled (its contract says so).
pub struct Stubborn(pub Arc<Notify>);

#[async_trait::async_trait]
impl ActionHandler for Stubborn {
    fn support(&self) -> HandlerSupport {
        HandlerSupport {
            modes: BTreeSet::from([Mode::Sync, Mode::Async]),
            cancellable: false,
            mutation: false,
            transactions: None,
        }
    }

    async fn invoke(
        &self,
        _ctx: &TrustedContext,
        _input: &Value,
    ) -> Result<HandlerOutput, HandlerError> {
        self.0.notified().await;
        Ok(HandlerOutput {
            output: json!({ "released": true }),
            message: Vec::new(),
        })
    }
}

/// A capability with `key_scope` idempotency (optional, `reject_conflict`) bound to the echo handler.
pub fn scoped_echo(id: &str, key_scope: &str) -> aip_core::Capability {
    serde_json::from_value(json!({
        "id": id, "name": id, "kind": "tool", "input_schema": { "type": "object" },
        "contract": {
            "side_effects": ["read"],
            "idempotency": { "requirement": "optional", "collision_behavior": "reject_conflict", "key_scope": key_scope },
            "execution": { "supports_sync": true, "supports_async": true, "supports_streaming": false, "supports_cancel": false,
                           "supports_retry": true, "expected_completion": "any", "retry_safety": "safe" },
            "data": { "sensitivity": "internal", "contains_pii": false, "redaction_required": false }
        }
    }))
    .unwrap()
}

impl Harness {
    /// Demo capabilities, `cap:t:stubborn`, one `cap:t:scope:<scope>` per idempotency scope.
    pub async fn start() -> Self {
        Self::start_with(runtime_config(4, 30_000)).await
    }

    /// [`Harness::start`] with another runtime configuration.
    pub async fn start_with(config: RuntimeConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn aip_store::Store> = Arc::new(
            aip_store::SqliteStore::open(dir.path().join("t.sqlite"))
                .await
                .unwrap(),
        );
        let release = Arc::new(Notify::new());
        let mut entries = demo_capabilities(Arc::clone(&store));
        let stubborn: aip_core::Capability = serde_json::from_value(json!({
            "id": "cap:t:stubborn", "name": "stubborn", "kind": "tool", "input_schema": { "type": "object" },
            "contract": {
                "side_effects": ["read"],
                "idempotency": { "requirement": "unsupported", "collision_behavior": "reject_conflict", "key_scope": "principal" },
                "execution": { "supports_sync": true, "supports_async": true, "supports_streaming": false, "supports_cancel": false,
                               "supports_retry": true, "expected_completion": "any", "retry_safety": "safe" },
                "data": { "sensitivity": "internal", "contains_pii": false, "redaction_required": false }
            }
        }))
        .unwrap();
        entries.push(entry(stubborn, Arc::new(Stubborn(Arc::clone(&release)))));
        for scope in [
            "action",
            "capability",
            "principal",
            "tenant",
            "external_account",
        ] {
            entries.push(entry(
                scoped_echo(&format!("cap:t:scope:{scope}"), scope),
                Arc::new(aip_runtime::handler::demo::EchoHandler),
            ));
        }
        entries.push(entry(
            scoped_echo("cap:t:scope:capability:b", "capability"),
            Arc::new(aip_runtime::handler::demo::EchoHandler),
        ));
        // Echoes whose outputs are of each sensitivity (spec 9.6).
        for sensitivity in ["confidential", "restricted", "regulated", "unknown"] {
            let mut echo = scoped_echo(&format!("cap:t:data:{sensitivity}"), "principal");
            if let Some(contract) = echo.contract.as_mut() {
                contract.data.sensitivity = serde_json::from_value(json!(sensitivity)).unwrap();
            }
            entries.push(entry(
                echo,
                Arc::new(aip_runtime::handler::demo::EchoHandler),
            ));
        }
        let runtime = Runtime::new(store, Registry::admit(entries).unwrap(), config);
        runtime.start().await.unwrap();
        Self {
            runtime,
            release,
            _dir: dir,
        }
    }

    /// Send one envelope to `/aip/v1/messages`; returns (status, reply envelope as JSON).
    pub async fn send(&self, caller: &Caller, envelope: &Value) -> (u16, Value) {
        let reply = self
            .runtime
            .handle(caller, envelope.to_string().as_bytes(), Accept::AnyMessage)
            .await;
        let body: Value = serde_json::from_slice(&reply.envelope.to_json_vec()).unwrap();
        (status_of(&reply), body)
    }

    /// Submit an action (optionally in a session); returns (status, reply).
    pub async fn act(&self, caller: &Caller, session: Option<&str>, action: Value) -> (u16, Value) {
        let mut env = envelope("aip.core.v1.action", json!({ "action": action }));
        if let Some(session) = session {
            env["session_id"] = json!(session);
        }
        self.send(caller, &env).await
    }

    /// Open a session for `caller`.
    pub async fn handshake(&self, caller: &Caller) -> String {
        let hello = envelope(
            "aip.core.v1.handshake",
            json!({ "handshake": { "client": { "id": caller.id, "kind": "service" }, "purpose": "test", "profiles": [] } }),
        );
        let (status, reply) = self.send(caller, &hello).await;
        assert_eq!(status, 200, "{reply}");
        reply["body"]["handshake_response"]["session_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The stored state of an action as `caller` sees it.
    pub async fn state(&self, caller: &Caller, action_id: &str) -> String {
        let status = self
            .runtime
            .action_status(caller, action_id, false, false, None)
            .await
            .unwrap();
        serde_json::to_value(status.state)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Wait (bounded) until the action is terminal; returns its state.
    pub async fn terminal(&self, caller: &Caller, action_id: &str) -> String {
        let status = self
            .runtime
            .action_status(caller, action_id, false, false, Some(20_000))
            .await
            .unwrap();
        serde_json::to_value(status.state)
            .unwrap()
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Wait (bounded) until the action is in `state`.
    pub async fn reach(&self, caller: &Caller, action_id: &str, state: &str) {
        for _ in 0..200 {
            if self.state(caller, action_id).await == state {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{action_id} never reached {state}");
    }
}

/// The runtime configuration of the tests: permissive limits, unsigned envelopes accepted.
pub fn runtime_config(async_workers: u32, lease_ms: u64) -> RuntimeConfig {
    RuntimeConfig {
        agent: agent_principal("agent:test", "test"),
        default_timeout_ms: 60_000,
        max_timeout_ms: 600_000,
        max_list_limit: 1000,
        default_list_limit: 100,
        max_wait_ms: 30_000,
        async_workers,
        lease_ms,
        max_attempts: 5,
        signatures: SignaturePolicy {
            require_signed: false,
            max_skew_ms: 300_000,
            replay_window_ms: 600_000,
            trusted_signers: HashMap::new(),
        },
        decode_limits: aip_core::Limits::default(),
        manifest_limits: json!({}),
        profiles: vec![aip_core::ProfileId::new("aip.native.http.v1")],
        directory: HashMap::new(),
        principals: HashMap::new(),
        resources: Vec::new(),
        reconcile_after_ms: 0,
        callbacks: aip_runtime::callback::CallbackPolicy::default(),
        channels: aip_runtime::channel::ChannelPolicy::default(),
        retention: aip_runtime::retention::RetentionPolicy::default(),
        delegation: aip_runtime::delegation::DelegationPolicy::default(),
        node_key: None,
        refusals: aip_runtime::RefusalPolicy::default(),
        boot: aip_runtime::BootIdentity::default(),
        rates: aip_runtime::RatePolicy::default(),
        read_rates: aip_runtime::RatePolicy::default(),
        quotas: aip_runtime::QuotaPolicy::default(),
    }
}

/// A capability entry without approval tiers.
pub fn entry(
    capability: aip_core::Capability,
    handler: Arc<dyn aip_runtime::ActionHandler>,
) -> aip_runtime::registry::CapabilityEntry {
    (capability, handler).into()
}

/// A caller in `tenant` with `scopes`.
pub fn caller(id: &str, tenant: &str, scopes: &[&str]) -> Caller {
    Caller {
        id: id.into(),
        kind: aip_core::PrincipalKind::Service,
        tenant: tenant.into(),
        scopes: scopes.iter().map(|s| (*s).to_owned()).collect(),
        issuer: "bearer".into(),
        external_account: None,
        roles: Vec::new(),
        groups: Vec::new(),
        approval_policies: Vec::new(),
    }
}

/// A reply's outcome as the HTTP binding reports it (its status table, restated for these tests):
/// 200 served, 202 accepted, 404/409 for hidden objects and conflicts, else the 19.1 category.
pub fn status_of(reply: &aip_runtime::Reply) -> u16 {
    use aip_core::ErrorCode;
    match reply.outcome {
        aip_runtime::Outcome::Done => 200,
        aip_runtime::Outcome::Accepted => 202,
        aip_runtime::Outcome::Refused(ErrorCode::NotFound) => 404,
        aip_runtime::Outcome::Refused(
            ErrorCode::IdempotencyConflict
            | ErrorCode::DuplicateActionId
            | ErrorCode::Terminal
            | ErrorCode::ApprovalClosed
            | ErrorCode::DecisionConflict
            | ErrorCode::EscalationClosed
            | ErrorCode::EscalationConflict
            | ErrorCode::PlanClaimed
            | ErrorCode::CallbackNotRedrivable
            | ErrorCode::TransactionConflict,
        ) => 409,
        aip_runtime::Outcome::Refused(
            ErrorCode::ApproverMismatch | ErrorCode::PrincipalMismatch,
        ) => 403,
        aip_runtime::Outcome::Refused(code) => code.category().http_status(),
        _ => 500,
    }
}

/// A fresh unique id with `prefix`.
pub fn id(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// An unsigned envelope carrying `body`.
pub fn envelope(message_type: &str, body: Value) -> Value {
    json!({
        "aip_version": "1.0",
        "message_type": message_type,
        "message_id": aip_core::MessageId::generate(),
        "sent_at": aip_core::Timestamp::now(),
        "body": body,
    })
}

/// Sends `env` as `caller` through the binding-independent entry point; returns (status, reply).
pub async fn send(
    runtime: &std::sync::Arc<aip_runtime::Runtime>,
    caller: &Caller,
    env: &Value,
) -> (u16, Value) {
    let reply = runtime
        .handle(
            caller,
            env.to_string().as_bytes(),
            aip_runtime::Accept::AnyMessage,
        )
        .await;
    let body: Value = serde_json::from_slice(&reply.envelope.to_json_vec()).unwrap();
    (status_of(&reply), body)
}

/// The typed error code of an error reply ("" for any other reply).
pub fn code(reply: &Value) -> &str {
    reply["body"]["error"]["error"]["code"]
        .as_str()
        .unwrap_or("")
}
