//! The `http` handler end to end: `aip serve` POSTs actions with their frozen trusted context to a
//! configured service; output schemas are enforced; a timed-out mutation is an uncertain outcome that is
//! never retried (spec 13.6, 19.3).
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::routing::post;
use serde_json::{Value, json};
use support::{Server, id, token_file};
use tokio::sync::Mutex;

#[derive(Clone, Default)]
struct Provider {
    seen: Arc<Mutex<Vec<Value>>>,
    slow_calls: Arc<AtomicUsize>,
}

async fn start_provider(provider: Provider) -> String {
    let weather = {
        let p = provider.clone();
        move |Json(body): Json<Value>| {
            let p = p.clone();
            async move {
                p.seen.lock().await.push(body.clone());
                let city = body["action"]["input"]["city"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                if city == "nowhere" {
                    return Json(json!({ "output": { "wrong": true } }));
                }
                Json(json!({ "output": { "city": city, "temp_c": 21 } }))
            }
        }
    };
    let slow = {
        let p = provider.clone();
        move |Json(_): Json<Value>| {
            let p = p.clone();
            async move {
                p.slow_calls.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(3)).await;
                Json(json!({ "output": { "charged": true } }))
            }
        }
    };
    let app = axum::Router::new()
        .route("/weather", post(weather))
        .route("/charge", post(slow));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

const CONTRACT_READ: &str = r#"side_effects = ["read"]
idempotency = { requirement = "optional", collision_behavior = "return_original_result", key_scope = "principal" }
execution = { supports_sync = true, supports_async = true, supports_streaming = false, supports_cancel = false, supports_retry = true, expected_completion = "any", retry_safety = "safe" }
data = { sensitivity = "internal", contains_pii = false, redaction_required = false }"#;

const CONTRACT_WRITE: &str = r#"side_effects = ["financial"]
idempotency = { requirement = "required", collision_behavior = "reject_conflict", key_scope = "tenant" }
execution = { supports_sync = true, supports_async = false, supports_streaming = false, supports_cancel = false, supports_retry = false, expected_completion = "sync", retry_safety = "unsafe" }
data = { sensitivity = "restricted", contains_pii = false, redaction_required = false }"#;

#[tokio::test]
async fn an_http_capability_gets_the_trusted_context_and_a_timed_out_mutation_is_uncertain_and_not_retried()
 {
    let provider = Provider::default();
    let base = start_provider(provider.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let tok = token_file(dir.path(), "svc.token", "svc-token");
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            r#"demo_capabilities = false

[[principals]]
id = "svc:caller"
kind = "service"
tenant = "acme"
scopes = ["invoke:cap:ext:*"]
token_file = "{tok}"

[[capabilities]]
id = "cap:ext:weather"
name = "Weather"
kind = "tool"
input_schema = {{ type = "object", properties = {{ city = {{ type = "string" }} }}, required = ["city"] }}
output_schema = {{ type = "object", required = ["temp_c"] }}
handler = {{ type = "http", url = "{base}/weather", timeout_ms = 2000 }}
[capabilities.contract]
{CONTRACT_READ}

[[capabilities]]
id = "cap:ext:charge"
name = "Charge"
kind = "tool"
input_schema = {{ type = "object" }}
handler = {{ type = "http", url = "{base}/charge", timeout_ms = 400 }}
policy = {{ allow_without_approval = true }}
[capabilities.contract]
{CONTRACT_WRITE}
"#,
            tok = tok.display()
        ),
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let client = server.client("svc-token");

    let (_, manifest) = client.get("/aip/v1/manifest").await;
    let ids: Vec<&str> = manifest["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["cap:ext:charge", "cap:ext:weather"]);

    // A tenant named in the body is a selector, never authority: another tenant's is refused and
    // nothing reaches the provider (spec 22.6).
    let (status, reply) = client
        .act(json!({ "id": id("act_"), "capability_id": "cap:ext:weather", "input": { "city": "Lisbon" }, "identity": { "tenant": { "id": "evil-corp" } } }))
        .await;
    assert_eq!(status, 403, "{reply}");
    assert_eq!(
        reply["body"]["error"]["error"]["code"],
        "aip.policy.scope_denied"
    );
    assert!(provider.seen.lock().await.is_empty());
    let action_id = id("act_");
    let (status, reply) = client
        .act(json!({ "id": action_id, "capability_id": "cap:ext:weather", "input": { "city": "Lisbon" }, "identity": { "tenant": { "id": "acme" } } }))
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["body"]["action_result"]["output"],
        json!({ "city": "Lisbon", "temp_c": 21 })
    );
    let seen = provider.seen.lock().await.clone();
    let context = &seen[0]["context"];
    assert_eq!(context["principal_id"], "svc:caller");
    assert_eq!(
        context["tenant"], "acme",
        "the tenant comes from configuration, never from the body"
    );
    assert_eq!(context["action_id"], json!(action_id));
    assert!(context["deadline_unix_ms"].as_u64().unwrap() > 0);
    assert!(
        !seen[0].to_string().contains("svc-token"),
        "the bearer token never leaves the runtime"
    );

    let (_, bad) = client.act(json!({ "id": id("act_"), "capability_id": "cap:ext:weather", "input": { "city": "nowhere" } })).await;
    assert_eq!(bad["body"]["action_result"]["status"], "failed");
    assert_eq!(
        bad["body"]["action_result"]["error"]["code"],
        "aip.action.output_schema_violation"
    );

    let (status, charged) = client.act(json!({ "id": id("act_"), "capability_id": "cap:ext:charge", "input": {}, "idempotency_key": "charge-1" })).await;
    assert_eq!(status, 200, "{charged}");
    let result = &charged["body"]["action_result"];
    assert_eq!(result["status"], "failed");
    assert_eq!(result["error"]["code"], "aip.connector.uncertain_outcome");
    assert_eq!(result["error"]["details"]["uncertain_outcome"], true);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        provider.slow_calls.load(Ordering::SeqCst),
        1,
        "an uncertain mutation is never retried"
    );
    let (status, again) = client.act(json!({ "id": id("act_"), "capability_id": "cap:ext:charge", "input": {}, "idempotency_key": "charge-1" })).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(provider.slow_calls.load(Ordering::SeqCst), 1);
}

/// Accepts TCP connections and completes a TLS handshake with a generated certificate before handing
/// the stream to axum; failed handshakes (an untrusting client) are skipped.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// An https provider on 127.0.0.1 with a fresh self-signed certificate for `localhost`; returns its
/// base URL and the certificate as PEM.
async fn start_tls_provider(provider: Provider) -> (String, String) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from(rustls::pki_types::PrivatePkcs8KeyDer::from(
        certified.signing_key.serialize_der(),
    ));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![certified.cert.der().clone()], key)
    .unwrap();
    let weather = move |Json(body): Json<Value>| {
        let p = provider.clone();
        async move {
            p.seen.lock().await.push(body);
            Json(json!({ "output": { "city": "Porto", "temp_c": 19 } }))
        }
    };
    let app = axum::Router::new().route("/weather", post(weather));
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tcp.local_addr().unwrap().port();
    let listener = TlsListener {
        tcp,
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
    };
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("https://localhost:{port}"), certified.cert.pem())
}

#[tokio::test]
async fn an_https_capability_is_called_over_tls_only_when_its_certificate_chains_to_a_trusted_root()
{
    let provider = Provider::default();
    let (base, ca_pem) = start_tls_provider(provider.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("private-ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let tok = token_file(dir.path(), "svc.token", "svc-token");
    let config = dir.path().join("aip.toml");
    let capability = |id: &str, ca: &str| {
        format!(
            r#"
[[capabilities]]
id = "{id}"
name = "Weather"
kind = "tool"
input_schema = {{ type = "object" }}
handler = {{ type = "http", url = "{base}/weather", timeout_ms = 3000{ca} }}
[capabilities.contract]
{CONTRACT_READ}
"#
        )
    };
    std::fs::write(
        &config,
        format!(
            "demo_capabilities = false\n\n[[principals]]\nid = \"svc:caller\"\ntenant = \"acme\"\nscopes = [\"invoke:cap:ext:*\"]\ntoken_file = \"{}\"\n{}{}",
            tok.display(),
            capability(
                "cap:ext:trusted",
                &format!(", ca_file = \"{}\"", ca_file.display())
            ),
            capability("cap:ext:untrusted", ""),
        ),
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let client = server.client("svc-token");

    let (status, reply) = client
        .act(json!({ "id": id("act_"), "capability_id": "cap:ext:trusted", "input": {} }))
        .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["body"]["action_result"]["status"], "completed",
        "{reply}"
    );
    assert_eq!(
        reply["body"]["action_result"]["output"],
        json!({ "city": "Porto", "temp_c": 19 })
    );
    assert_eq!(provider.seen.lock().await.len(), 1);

    // The same service without the private CA: the handshake fails, nothing reaches the service.
    let (status, reply) = client
        .act(json!({ "id": id("act_"), "capability_id": "cap:ext:untrusted", "input": {} }))
        .await;
    assert_eq!(status, 200, "{reply}");
    let result = &reply["body"]["action_result"];
    assert_eq!(result["status"], "failed", "{reply}");
    assert_eq!(
        result["error"]["code"], "aip.connector.unreachable",
        "{reply}"
    );
    assert_eq!(provider.seen.lock().await.len(), 1);
}

/// A transactional provider: `/pay` records every call and, for a commit of `{"slow": true}`, books
/// the payment under the runtime's operation id and then answers too late; `/pay/reconcile` says
/// whether an operation was booked.
#[derive(Clone, Default)]
struct Ledger {
    calls: Arc<Mutex<Vec<Value>>>,
    booked: Arc<Mutex<Vec<String>>>,
    reconciled: Arc<Mutex<Vec<Value>>>,
}

async fn start_ledger(ledger: Ledger) -> String {
    let pay = {
        let l = ledger.clone();
        move |Json(body): Json<Value>| {
            let l = l.clone();
            async move {
                l.calls.lock().await.push(body.clone());
                let tx = &body["context"]["transaction"];
                if tx["mode"] == "commit" {
                    let op = tx["operation"]["operation_id"].as_str().unwrap().to_owned();
                    l.booked.lock().await.push(op.clone());
                    if body["action"]["input"]["slow"] == true {
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                    return Json(json!({ "output": { "paid": op },
                        "provider_operation": { "provider": "ledger", "operation_id": format!("ledger-{op}") } }));
                }
                Json(json!({ "output": { "mode": tx["mode"] } }))
            }
        }
    };
    let reconcile = {
        let l = ledger.clone();
        move |Json(body): Json<Value>| {
            let l = l.clone();
            async move {
                l.reconciled.lock().await.push(body.clone());
                let op = body["operation"]["operation_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                // The first question only gets a cursor to continue from.
                if body["cursor"].is_null() {
                    return Json(
                        json!({ "outcome": "pending", "retry_after_ms": 1000, "cursor": "page-2" }),
                    );
                }
                if l.booked.lock().await.contains(&op) {
                    Json(json!({ "outcome": "committed", "output": { "paid": op } }))
                } else {
                    Json(json!({ "outcome": "not_committed" }))
                }
            }
        }
    };
    let app = axum::Router::new()
        .route("/pay", post(pay))
        .route("/pay/reconcile", post(reconcile));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

const CONTRACT_TX: &str = r#"side_effects = ["financial"]
idempotency = { requirement = "optional", collision_behavior = "reject_conflict", key_scope = "tenant" }
execution = { supports_sync = true, supports_async = false, supports_streaming = false, supports_cancel = false, supports_retry = false, expected_completion = "sync", retry_safety = "unsafe" }
data = { sensitivity = "restricted", contains_pii = false, redaction_required = false }
transaction = { supported_modes = ["dry_run", "plan", "commit", "reconcile"], requires_plan_before_commit = true, dry_run_fidelity = "downstream_validation" }"#;

fn tx_envelope(capability: &str, input: Value, context: Value) -> Value {
    let transaction_id = context["transaction_id"]
        .as_str()
        .map_or_else(|| id("txn_"), str::to_owned);
    support::envelope(
        "aip.transaction.v1.request",
        json!({ "transaction_request": {
            "transaction_id": transaction_id,
            "action": { "id": id("act_"), "capability_id": capability, "input": input, "transaction": context },
            "requested_by": { "id": "svc:caller", "kind": "service" },
        } }),
    )
}

#[tokio::test]
async fn an_http_capability_runs_transactions_and_its_service_reconciles_a_timed_out_commit() {
    let ledger = Ledger::default();
    let base = start_ledger(ledger.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let tok = token_file(dir.path(), "svc.token", "svc-token");
    let capability = |reconcile: &str| {
        format!(
            r#"demo_capabilities = false

[[principals]]
id = "svc:caller"
kind = "service"
tenant = "acme"
scopes = ["invoke:cap:ext:*"]
token_file = "{tok}"

[[capabilities]]
id = "cap:ext:pay"
name = "Pay"
kind = "tool"
input_schema = {{ type = "object" }}
handler = {{ type = "http", url = "{base}/pay", timeout_ms = 400{reconcile} }}
policy = {{ allow_without_approval = true }}
[capabilities.contract]
{CONTRACT_TX}
"#,
            tok = tok.display()
        )
    };
    // A contract listing reconcile without a service to ask is refused at startup.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, capability("")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("bad-data"))
        .arg("--config")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("reconcile_url"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        capability(&format!(", reconcile_url = \"{base}/pay/reconcile\"")),
    )
    .unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        Some(&config),
        &[("AIP_LIMITS__RECONCILE_AFTER_MS", "0")],
    );
    let client = server.client("svc-token");
    let send = |env: Value| {
        let client = server.client("svc-token");
        async move { client.post("/aip/v1/messages", &env).await }
    };
    // The dry run reaches the service as a dry run.
    let (status, reply) = send(tx_envelope(
        "cap:ext:pay",
        json!({ "slow": true }),
        json!({ "mode": "dry_run" }),
    ))
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["body"]["transaction_result"]["status"],
        "dry_run_completed"
    );
    // A plain call is refused: this contract commits only plans.
    let (_, reply) = client
        .act(json!({ "id": id("act_"), "capability_id": "cap:ext:pay", "input": {} }))
        .await;
    assert_eq!(
        reply["body"]["error"]["error"]["code"], "aip.transaction.mode_unsupported",
        "{reply}"
    );
    let (_, reply) = send(tx_envelope(
        "cap:ext:pay",
        json!({ "slow": true }),
        json!({ "mode": "plan" }),
    ))
    .await;
    let planned = reply["body"]["transaction_result"].clone();
    assert_eq!(planned["status"], "planned", "{reply}");
    let (txn_id, plan_id) = (
        planned["transaction_id"].as_str().unwrap().to_owned(),
        planned["plan"]["plan_id"].as_str().unwrap().to_owned(),
    );
    // The commit carries its plan and operation; the service answers too late: unknown, not failed.
    let (_, reply) = send(tx_envelope(
        "cap:ext:pay",
        json!({ "slow": true }),
        json!({ "mode": "commit", "transaction_id": txn_id, "plan_id": plan_id }),
    ))
    .await;
    let committed = reply["body"]["transaction_result"].clone();
    assert_eq!(committed["status"], "outcome_unknown", "{reply}");
    let calls = ledger.calls.lock().await.clone();
    let modes: Vec<&str> = calls
        .iter()
        .map(|c| c["context"]["transaction"]["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["dry_run", "plan", "commit"]);
    assert!(
        calls[2]["fencing_token"].as_u64().unwrap() >= 1,
        "{}",
        calls[2]
    );
    let commit_call = &calls[2]["context"]["transaction"];
    assert_eq!(commit_call["plan"]["plan_id"], plan_id.as_str());
    assert_eq!(commit_call["operation"], committed["provider_operation"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(ledger.calls.lock().await.len(), 3, "never retried");
    // The service is asked about the recorded operation: not yet known, continue from a cursor.
    let reconcile = || {
        tx_envelope(
            "cap:ext:pay",
            json!({}),
            json!({ "mode": "reconcile", "transaction_id": txn_id }),
        )
    };
    let (_, reply) = send(reconcile()).await;
    let pending = &reply["body"]["transaction_result"];
    assert_eq!(pending["status"], "outcome_unknown", "{reply}");
    assert_eq!(pending["reconciliation_cursor"], "page-2");
    assert!(pending["reconcile_after"].is_string());
    // A request naming another cursor than the retained one is refused.
    let mut wrong = reconcile();
    wrong["body"]["transaction_request"]["reconciliation_cursor"] = json!("page-9");
    let (_, reply) = send(wrong).await;
    assert_eq!(
        reply["body"]["error"]["error"]["code"], "aip.transaction.plan_mismatch",
        "{reply}"
    );
    // The next reconciliation continues from the retained cursor: it was booked.
    let (_, reply) = send(reconcile()).await;
    let reconciled = &reply["body"]["transaction_result"];
    assert_eq!(reconciled["status"], "reconciled", "{reply}");
    assert_eq!(reconciled["result"]["output"]["outcome"], "committed");
    let asked = ledger.reconciled.lock().await.clone();
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0]["operation"], committed["provider_operation"]);
    assert_eq!(
        asked[1]["cursor"], "page-2",
        "the retained cursor is handed on"
    );
    let (_, view) = client.get(&format!("/aip/v1/transactions/{txn_id}")).await;
    assert_eq!(view["status"], "reconciled", "{view}");
    // A commit that is answered in time keeps the service's own reference for the operation.
    let (_, reply) = send(tx_envelope(
        "cap:ext:pay",
        json!({ "slow": false }),
        json!({ "mode": "plan" }),
    ))
    .await;
    let planned = reply["body"]["transaction_result"].clone();
    let (_, reply) = send(tx_envelope(
        "cap:ext:pay",
        json!({ "slow": false }),
        json!({ "mode": "commit",
        "transaction_id": planned["transaction_id"], "plan_id": planned["plan"]["plan_id"] }),
    ))
    .await;
    let committed = &reply["body"]["transaction_result"];
    assert_eq!(committed["status"], "committed", "{reply}");
    assert_eq!(
        committed["provider_operation"]["provider"], "ledger",
        "{reply}"
    );
    assert!(
        committed["provider_operation"]["operation_id"]
            .as_str()
            .unwrap()
            .starts_with("ledger-op_")
    );
}
