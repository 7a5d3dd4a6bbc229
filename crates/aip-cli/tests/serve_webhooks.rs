//! Signed webhook ingress (`[[webhooks]]`, `POST /aip/v1/webhooks/{id}`, spec 21.3):
//! deliveries signed by the Standard Webhooks library (`standardwebhooks` 1.1.0, driven by
//! `tests/interop/webhook_send.py`) are admitted once as actions of the subscription's principal;
//! every forged, stale, unbound or oversized delivery is refused with nothing created; a replay is a
//! duplicate also after a restart; an acknowledged delivery survives kill -9; a storage failure is a
//! 5xx the sender can retry, and a subscription past its principal's rate or concurrency quota is
//! a 429 the sender retries. Without the interop venv this prints a notice and skips; under
//! `CI=true` it fails.
#![allow(clippy::unwrap_used)]

mod cluster;
mod support;

use support::webhook::{case, python, send, with};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use aip_server::profile::webhook::{Secret, SigningOrder};
use serde_json::{Value, json};
use support::{Server, token_file};

const OPS: &str = "ops-token-0123456789abcdef";
const ORDERS_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const ORDERS_ROTATED: &str = "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const BOOKINGS_SECRET: &str = "whsec_Ym9va2luZ3Mtc2VjcmV0LTAxMjM0NTY3ODlhYmNkZWY=";
const BILLING_SECRET: &str = "whsec_ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

fn config(dir: &Path) -> PathBuf {
    let ops = token_file(dir, "ops.token", OPS);
    let path = dir.join("aip.toml");
    std::fs::write(
        &path,
        format!(
            r#"
# A delivery whose action was running when the node was killed is taken over after its lease.
[limits]
lease_ms = 1000

[[principals]]
id = "ops"
token_file = "{ops}"
scopes = ["*"]

[[webhooks]]
id = "orders"
secrets = ["{ORDERS_ROTATED}", "{ORDERS_SECRET}"]
max_body_bytes = 2048
events = {{ "order.created" = "cap:demo:echo", "booking.requested" = "cap:demo:book" }}

[[webhooks]]
id = "bookings"
secrets = ["{BOOKINGS_SECRET}"]
input = "data"
events = {{ "booking.requested" = "cap:demo:book" }}

[[webhooks]]
id = "billing"
secrets = ["{BILLING_SECRET}"]
signing_order = "timestamp.id.body"
event_type_field = "event_type"
input = "data"
tolerance_secs = 60
events = {{ "invoice.paid" = "cap:demo:echo" }}
"#,
            ops = ops.display()
        ),
    )
    .unwrap();
    path
}

/// The actions of the tenant (of one principal when `principal` is set), as the `ops` reader sees
/// them.
async fn actions(server: &Server, principal: Option<&str>) -> Vec<Value> {
    let filter = principal.map_or(String::new(), |p| format!("&principal_id={p}"));
    let (status, page) = server
        .client(OPS)
        .get(&format!("/aip/v1/actions?limit=200{filter}"))
        .await;
    assert_eq!(status, 200, "{page}");
    page["actions"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn signed_deliveries_are_admitted_once_and_every_forged_stale_or_unbound_one_creates_nothing()
{
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config(dir.path())), &[]);
    let order = json!({ "type": "order.created", "data": { "id": "o-1", "total": 12 } });
    let id = support::id("msg_");
    let good = case(&server, "good", "orders", ORDERS_SECRET, &id, &order);
    let other = |name: &str| {
        case(
            &server,
            name,
            "orders",
            ORDERS_SECRET,
            &support::id("msg_"),
            &order,
        )
    };
    let refused = [
        with(other("flipped byte"), "tamper", json!("flip")),
        with(other("re-serialized"), "tamper", json!("reserialize")),
        case(
            &server,
            "another subscription's secret",
            "orders",
            BILLING_SECRET,
            &support::id("msg_"),
            &order,
        ),
        with(other("no id"), "tamper", json!("drop:webhook-id")),
        with(
            other("no timestamp"),
            "tamper",
            json!("drop:webhook-timestamp"),
        ),
        with(
            other("no signature"),
            "tamper",
            json!("drop:webhook-signature"),
        ),
        with(other("ten minutes old"), "ts_offset", json!(-600)),
        with(other("ten minutes ahead"), "ts_offset", json!(600)),
        with(other("non-numeric timestamp"), "tamper", json!("ts:soon")),
        case(
            &server,
            "unknown subscription",
            "nobody",
            ORDERS_SECRET,
            &support::id("msg_"),
            &order,
        ),
        case(
            &server,
            "event type not mapped",
            "orders",
            ORDERS_SECRET,
            &support::id("msg_"),
            &json!({ "type": "order.deleted" }),
        ),
        case(
            &server,
            "no event type",
            "orders",
            ORDERS_SECRET,
            &support::id("msg_"),
            &json!({ "data": {} }),
        ),
        case(
            &server,
            "over the body limit",
            "orders",
            ORDERS_SECRET,
            &support::id("msg_"),
            &json!({ "type": "order.created", "pad": "x".repeat(4096) }),
        ),
        with(
            case(
                &server,
                "not JSON",
                "orders",
                ORDERS_SECRET,
                &support::id("msg_"),
                &order,
            ),
            "body",
            json!("type=order.created"),
        ),
        // Schema-valid for the type but not for its capability: cap:demo:book needs its fields.
        case(
            &server,
            "input the capability refuses",
            "orders",
            ORDERS_SECRET,
            &support::id("msg_"),
            &json!({ "type": "booking.requested", "data": {} }),
        ),
    ];
    let expected = [
        401, 401, 401, 401, 401, 401, 401, 401, 401, 404, 403, 400, 413, 400, 400,
    ];
    let mut cases = vec![good.clone()];
    cases.extend(refused.iter().cloned());
    cases.push(with(good.clone(), "name", json!("replay")));
    cases.push(with(
        other("rotated signature list"),
        "tamper",
        json!("rotate"),
    ));
    let results = send(&python, &cases);

    assert_eq!(results[0]["status"], 202, "{}", results[0]);
    let admitted = &results[0]["body"];
    assert_eq!(admitted["status"], "accepted");
    let action_id = admitted["action_id"].as_str().unwrap().to_owned();
    for (result, status) in results[1..=refused.len()].iter().zip(expected) {
        assert_eq!(result["status"], status, "{result}");
        assert!(
            result["body"]["error"]["code"].is_string(),
            "untyped refusal: {result}"
        );
    }
    let codes: Vec<&str> = results[1..=9]
        .iter()
        .map(|r| r["body"]["error"]["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "aip.security.signature_invalid",
            "aip.security.signature_invalid",
            "aip.security.signature_invalid",
            "aip.auth.unauthenticated",
            "aip.auth.unauthenticated",
            "aip.auth.unauthenticated",
            "aip.security.clock_skew",
            "aip.security.clock_skew",
            "aip.security.clock_skew",
        ]
    );
    assert_eq!(
        results[11]["body"]["error"]["code"],
        "aip.webhook.event_type_not_allowed"
    );
    assert_eq!(
        results[13]["body"]["error"]["code"],
        "aip.transport.body_rejected"
    );
    // The forged deliveries are audited in the subscription's tenant, aggregated per subscription:
    // the first at once (written in the background), the rest counted in the window's later event.
    let mut audit = serde_json::Value::Null;
    for _ in 0..40 {
        audit = server
            .admin()
            .get("/aip/v1/audit/events?limit=1000")
            .await
            .1;
        if audit.to_string().contains("auth.refused") {
            break;
        }
        support::pause(50).await;
    }
    let forged: Vec<_> = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "auth.refused")
        .collect();
    assert_eq!(forged.len(), 1, "{audit}");
    assert_eq!(forged[0]["data"]["reason"], "bad_webhook_signature");
    assert_eq!(forged[0]["data"]["source"], "webhook:orders");
    assert_eq!(forged[0]["data"]["count"], 1);
    let replay = &results[refused.len() + 1];
    assert_eq!(replay["status"], 200, "{replay}");
    assert_eq!(replay["body"]["status"], "duplicate");
    assert_eq!(replay["body"]["action_id"], action_id.as_str());
    let rotated = results.last().unwrap();
    assert_eq!(rotated["status"], 202, "{rotated}");

    // Exactly the two accepted deliveries exist, acting as the subscription's principal.
    let all = actions(&server, Some("svc:webhook:orders")).await;
    assert_eq!(all.len(), actions(&server, None).await.len());
    let mut ids: Vec<&str> = all
        .iter()
        .map(|a| a["action_id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    let mut want = vec![
        action_id.as_str(),
        rotated["body"]["action_id"].as_str().unwrap(),
    ];
    want.sort_unstable();
    assert_eq!(ids, want, "{all:?}");
    let view = server.client(OPS).wait_terminal(&action_id).await;
    assert_eq!(view["state"], "completed", "{view}");
    assert_eq!(view["result"]["output"], order, "{view}");
}

#[tokio::test]
async fn the_other_signing_order_the_data_member_and_the_delivery_id_as_idempotency_key() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config(dir.path())), &[]);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    // `billing` signs "{timestamp}.{id}.{body}" (the library only signs the other order).
    let secret = Secret::parse(BILLING_SECRET).unwrap();
    let body = br#"{"event_type":"invoice.paid","data":{"invoice":"in-7","cents":700}}"#;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let post = |order: SigningOrder, id: &str| {
        http.post(format!("http://{}/aip/v1/webhooks/billing", server.base))
            .header("webhook-id", id)
            .header("webhook-timestamp", &now)
            .header("webhook-signature", secret.sign(order, id, &now, body))
            .body(body.to_vec())
            .send()
    };
    // Bytes that are not UTF-8, validly signed: refused once the signature passed.
    let garbage: &[u8] = b"\xff\xfe{\"event_type\":\"invoice.paid\"}";
    let refused = http
        .post(format!("http://{}/aip/v1/webhooks/billing", server.base))
        .header("webhook-id", "inv-0")
        .header("webhook-timestamp", &now)
        .header(
            "webhook-signature",
            secret.sign(SigningOrder::TimestampIdBody, "inv-0", &now, garbage),
        )
        .body(garbage.to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let refused: Value = refused.json().await.unwrap();
    assert_eq!(refused["error"]["code"], "aip.envelope.malformed_json");
    let wrong_order = post(SigningOrder::IdTimestampBody, "inv-1").await.unwrap();
    assert_eq!(wrong_order.status(), 401);
    let accepted = post(SigningOrder::TimestampIdBody, "inv-1").await.unwrap();
    assert_eq!(accepted.status(), 202);
    let accepted: Value = accepted.json().await.unwrap();
    let view = server
        .client(OPS)
        .wait_terminal(accepted["action_id"].as_str().unwrap())
        .await;
    assert_eq!(
        view["result"]["output"],
        json!({ "invoice": "in-7", "cents": 700 }),
        "{view}"
    );
    assert_eq!(actions(&server, Some("svc:webhook:billing")).await.len(), 1);

    // cap:demo:book requires a key: the delivery id, scoped by the subscription, is that key.
    let booking = json!({ "type": "booking.requested", "data": { "name": "Ada", "party_size": 2, "time": "19:00" } });
    let id = support::id("msg_");
    let results = send(
        &python,
        &[case(
            &server,
            "booking",
            "bookings",
            BOOKINGS_SECRET,
            &id,
            &booking,
        )],
    );
    assert_eq!(results[0]["status"], 202, "{}", results[0]);
    let view = server
        .client(OPS)
        .wait_terminal(results[0]["body"]["action_id"].as_str().unwrap())
        .await;
    assert_eq!(view["state"], "completed", "{view}");
    // The same delivery id with another body is a conflict, not a second booking.
    let changed = json!({ "type": "booking.requested", "data": { "name": "Bob", "party_size": 3, "time": "20:00" } });
    let results = send(
        &python,
        &[case(
            &server,
            "reused id",
            "bookings",
            BOOKINGS_SECRET,
            &id,
            &changed,
        )],
    );
    assert_eq!(results[0]["status"], 409, "{}", results[0]);
    assert_eq!(
        results[0]["body"]["error"]["code"],
        "aip.idempotency.conflict"
    );
    assert_eq!(actions(&server, None).await.len(), 2);
}

#[tokio::test]
async fn an_acknowledged_delivery_survives_kill_9_and_its_replay_after_the_restart_is_a_duplicate()
{
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = config(dir.path());
    let mut server = Server::start(&data, Some(&config), &[]);
    let order = json!({ "type": "order.created", "data": { "id": "o-9" } });
    let id = support::id("msg_");
    let delivery = case(&server, "first", "orders", ORDERS_SECRET, &id, &order);
    let results = send(&python, std::slice::from_ref(&delivery));
    assert_eq!(results[0]["status"], 202, "{}", results[0]);
    let action_id = results[0]["body"]["action_id"].as_str().unwrap().to_owned();
    // Killed right after the acknowledgement: the event was durably admitted.
    server.kill();
    let server = Server::start(&data, Some(&config), &[]);
    let view = server.client(OPS).wait_terminal(&action_id).await;
    assert_eq!(view["state"], "completed", "{view}");
    let replay = case(&server, "replay", "orders", ORDERS_SECRET, &id, &order);
    let results = send(&python, &[replay]);
    assert_eq!(results[0]["status"], 200, "{}", results[0]);
    assert_eq!(results[0]["body"]["status"], "duplicate");
    assert_eq!(actions(&server, None).await.len(), 1);
}

#[tokio::test]
async fn a_storage_failure_is_a_5xx_and_the_retried_delivery_is_then_admitted() {
    let Some(python) = python() else { return };
    let Some(db) = cluster::TestDb::create("serve_webhooks").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let child = Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .args(["--database", &db.url, "--config"])
        .arg(config(dir.path()))
        .env("RUST_LOG", "error")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let server = Server::from_child(child, &data);
    // Every new action row now fails to insert.
    db.exec("ALTER TABLE aip_actions ADD CONSTRAINT refuse_all CHECK (false) NOT VALID")
        .await;
    let order = json!({ "type": "order.created", "data": { "id": "o-5" } });
    let delivery = case(
        &server,
        "during the failure",
        "orders",
        ORDERS_SECRET,
        &support::id("msg_"),
        &order,
    );
    let results = send(&python, std::slice::from_ref(&delivery));
    assert_eq!(results[0]["status"], 503, "{}", results[0]);
    assert_eq!(results[0]["body"]["error"]["category"], "temporary");
    db.exec("ALTER TABLE aip_actions DROP CONSTRAINT refuse_all")
        .await;
    let results = send(&python, &[with(delivery, "name", json!("retried"))]);
    assert_eq!(results[0]["status"], 202, "{}", results[0]);
    let view = server
        .client(OPS)
        .wait_terminal(results[0]["body"]["action_id"].as_str().unwrap())
        .await;
    assert_eq!(view["state"], "completed", "{view}");
}

#[tokio::test]
async fn a_subscription_past_its_principals_rate_is_answered_429_typed_and_its_sender_retry_is_admitted()
 {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let mut text = std::fs::read_to_string(&config).unwrap();
    // Spec 22.8: the subscription's principal has a bucket of one delivery, refilled once a second.
    text.push_str(
        "\n[limits.principal_rates]\n\"svc:webhook:orders\" = { per_second = 1, burst = 1 }\n",
    );
    std::fs::write(&config, text).unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let deliveries: Vec<Value> = (0..3)
        .map(|n| {
            case(
                &server,
                &format!("order {n}"),
                "orders",
                ORDERS_SECRET,
                &support::id("msg_"),
                &json!({ "type": "order.created", "data": { "id": format!("o-{n}") } }),
            )
        })
        .collect();
    let results = send(&python, &deliveries);
    assert_eq!(results[0]["status"], 202, "{}", results[0]);
    let refused = results
        .iter()
        .find(|r| r["status"] == 429)
        .unwrap_or_else(|| panic!("no delivery was rate limited: {results:?}"));
    let error = &refused["body"]["error"];
    assert_eq!(error["code"], "aip.limit.rate_limited", "{refused}");
    assert_eq!(error["retryable"], true, "{refused}");
    assert_eq!(refused["retry_after"], "1", "{refused}");
    // Nothing was admitted for it; the sender's retry after the refill is.
    let refused_name = refused["name"].as_str().unwrap();
    let retry = deliveries
        .iter()
        .find(|d| d["name"] == refused_name)
        .cloned()
        .unwrap();
    let before = actions(&server, Some("svc:webhook:orders")).await.len();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let results = send(&python, &[with(retry, "name", json!("retried"))]);
    assert_eq!(results[0]["status"], 202, "{}", results[0]);
    assert_eq!(
        actions(&server, Some("svc:webhook:orders")).await.len(),
        before + 1
    );
}

#[tokio::test]
async fn a_subscription_at_its_principals_concurrency_quota_is_answered_429_typed_until_its_action_finishes()
 {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());
    let mut text = std::fs::read_to_string(&config).unwrap();
    // Spec 22.8: the subscription's principal may have one unfinished action at a time.
    text.push_str(&format!(
        "\n[[webhooks]]\nid = \"naps\"\nsecrets = [\"{BOOKINGS_SECRET}\"]\ninput = \"data\"\n\
         events = {{ \"nap\" = \"cap:demo:sleep\" }}\n\n\
         [limits.principal_running]\n\"svc:webhook:naps\" = 1\n"
    ));
    std::fs::write(&config, text).unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let nap = |name: &str| {
        case(
            &server,
            name,
            "naps",
            BOOKINGS_SECRET,
            &support::id("msg_"),
            &json!({ "type": "nap", "data": { "ms": 1500 } }),
        )
    };
    let (first, second) = (nap("first"), nap("second"));
    let results = send(&python, &[first, second.clone()]);
    assert_eq!(results[0]["status"], 202, "{}", results[0]);
    assert_eq!(results[1]["status"], 429, "{}", results[1]);
    let error = &results[1]["body"]["error"];
    assert_eq!(error["code"], "aip.limit.quota_exceeded", "{}", results[1]);
    assert_eq!(error["retryable"], true, "{}", results[1]);
    assert_eq!(error["details"]["limit"], 1, "{}", results[1]);
    assert_eq!(results[1]["retry_after"], "1", "{}", results[1]);
    // Nothing was admitted for the refused delivery; once the first nap ends, its retry is.
    let held = actions(&server, Some("svc:webhook:naps")).await;
    assert_eq!(held.len(), 1, "{held:?}");
    let first_id = held[0]["action_id"].as_str().unwrap().to_owned();
    server.client(OPS).wait_terminal(&first_id).await;
    let results = send(&python, &[with(second, "name", json!("retried"))]);
    assert_eq!(results[0]["status"], 202, "{}", results[0]);
    assert_eq!(actions(&server, Some("svc:webhook:naps")).await.len(), 2);
}
