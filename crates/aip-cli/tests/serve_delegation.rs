//! Delegation between two `aip serve` peers (spec 14): node A serves capabilities by
//! delegating them to node B over HTTP; B admits each child through its normal admission as A's
//! peer principal and answers with a result signed by its node key; A's parent completes from that
//! signed result only. Negative cases: an unknown signer, a pinned key that is not the peer's,
//! a scope that does not cover the child, a loop A→B→A, an 11-entry chain, and the cancel of a
//! parent propagating to its child.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use ed25519_dalek::SigningKey;
use serde_json::{Value, json};
use support::nats::nats_url;
use support::peers::{key_file, routed};
use support::{Client, Server, envelope, free_port, id, pause};

/// `aip serve` on `port` with `config` (TOML text) in `dir`.
fn start(dir: &Path, port: u16, config: &str) -> Server {
    let data = dir.join("data");
    let file = dir.join("aip.toml");
    std::fs::write(&file, config).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_aip"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(&data)
        .arg("--config")
        .arg(&file)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Server::from_child(child, &data)
}

struct Pair {
    a: Server,
    b: Server,
    a_key: SigningKey,
    _dir: tempfile::TempDir,
}

/// The contract of the loop's capabilities (`cap:b:loop` on A, `cap:a:echo` on B).
fn loop_contract() -> Value {
    json!({"side_effects": ["read"],
           "idempotency": {"requirement": "optional", "collision_behavior": "return_original_result", "key_scope": "principal"},
           "execution": {"supports_sync": true, "supports_async": true, "supports_streaming": false, "supports_cancel": true,
                         "supports_retry": true, "expected_completion": "any", "retry_safety": "safe"},
           "data": {"sensitivity": "internal", "contains_pii": false, "redaction_required": false}})
}

/// A node that answers every delegation with a completed result signed by a key nobody pinned.
async fn forger() -> (String, u16) {
    let key = aip_core::signing::generate_signing_key();
    let app = axum::Router::new().route(
        "/aip/v1/messages",
        axum::routing::post(move |body: String| {
            let key = key.clone();
            async move {
                let request: Value = serde_json::from_str(&body).unwrap();
                let d = &request["body"]["delegation_request"];
                let child = d["child_action"]["id"].clone();
                let mut answer = envelope(
                    "aip.agent.v1.delegation_result",
                    json!({ "delegation_result": {
                        "delegation_id": d["delegation_id"], "parent_action_id": d["parent_action_id"],
                        "child_action_id": child, "status": "completed",
                        "result": { "action_id": child, "status": "completed", "output": { "forged": true } },
                    } }),
                );
                aip_core::signing::sign_value(&mut answer, &key).unwrap();
                answer.to_string()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let pinned =
        aip_core::signing::did_key(&aip_core::signing::generate_signing_key().verifying_key());
    (pinned, port)
}

/// B first (its manifest gives the contracts A must state), then A.
async fn pair() -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let a_key = aip_core::signing::generate_signing_key();
    let b_key = aip_core::signing::generate_signing_key();
    let a_did = key_file(&a_dir.join("node.key"), &a_key);
    let b_did = key_file(&b_dir.join("node.key"), &b_key);
    let wrong_did =
        aip_core::signing::did_key(&aip_core::signing::generate_signing_key().verifying_key());
    let (a_port, b_port) = (free_port(), free_port());
    // B routes `cap:a:echo` back to A (for the loop case).
    let b_config = format!(
        "node_key_file = \"{}\"\n[delegation]\ntrust_domain = \"b.example\"\n\n\
         [[peers]]\nname = \"a\"\ndid = \"{a_did}\"\ntrust_domain = \"a.example\"\nurl = \"http://127.0.0.1:{a_port}\"\n\
         scopes = [\"invoke:cap:demo:echo\", \"invoke:cap:demo:sleep\", \"invoke:cap:demo:book\", \"invoke:cap:a:echo\"]\n\n{}",
        b_dir.join("node.key").display(),
        routed(
            "cap:a:echo",
            &loop_contract(),
            &json!({"type": "object"}),
            "a",
            "cap:demo:echo",
            None
        ),
    );
    let b = start(&b_dir, b_port, &b_config);
    let (_, manifest) = b.admin().get("/aip/v1/manifest").await;
    let cap = |id: &str| {
        manifest["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap()
            .clone()
    };
    let (echo, sleep, book) = (
        cap("cap:demo:echo"),
        cap("cap:demo:sleep"),
        cap("cap:demo:book"),
    );
    let (forged_did, forger_port) = forger().await;
    let a_config = format!(
        "node_key_file = \"{}\"\n[delegation]\ntrust_domain = \"a.example\"\n\n\
         [[peers]]\nname = \"b\"\ndid = \"{b_did}\"\ntrust_domain = \"b.example\"\nurl = \"http://127.0.0.1:{b_port}\"\nscopes = [\"invoke:cap:demo:echo\"]\n\n\
         [[peers]]\nname = \"b-impostor\"\ndid = \"{wrong_did}\"\ntrust_domain = \"b.example\"\nurl = \"http://127.0.0.1:{b_port}\"\n\n\
         [[peers]]\nname = \"forger\"\ndid = \"{forged_did}\"\ntrust_domain = \"f.example\"\nurl = \"http://127.0.0.1:{forger_port}\"\n\n{}{}{}{}{}{}",
        a_dir.join("node.key").display(),
        routed(
            "cap:b:echo",
            &echo["contract"],
            &echo["input_schema"],
            "b",
            "cap:demo:echo",
            None
        ),
        routed(
            "cap:b:sleep",
            &sleep["contract"],
            &sleep["input_schema"],
            "b",
            "cap:demo:sleep",
            None
        ),
        routed(
            "cap:b:book",
            &book["contract"],
            &book["input_schema"],
            "b",
            "cap:demo:book",
            Some("invoke:cap:demo:echo")
        ),
        routed(
            "cap:b:impostor",
            &echo["contract"],
            &echo["input_schema"],
            "b-impostor",
            "cap:demo:echo",
            None
        ),
        routed(
            "cap:b:loop",
            &loop_contract(),
            &json!({"type": "object"}),
            "b",
            "cap:a:echo",
            None
        ),
        routed(
            "cap:f:echo",
            &echo["contract"],
            &echo["input_schema"],
            "forger",
            "cap:demo:echo",
            None
        ),
    );
    let a = start(&a_dir, a_port, &a_config);
    Pair {
        a,
        b,
        a_key,
        _dir: dir,
    }
}

async fn call(client: &Client, capability: &str, input: Value) -> (String, u16, Value) {
    let action_id = id("act_");
    let (status, reply) = client
        .act(json!({ "id": action_id, "capability_id": capability, "input": input }))
        .await;
    (action_id, status, reply)
}

fn error_code(reply: &Value) -> String {
    let result = &reply["body"]["action_result"];
    result["error"]["code"]
        .as_str()
        .or_else(|| reply["body"]["error"]["error"]["code"].as_str())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn a_capability_delegated_to_a_peer_completes_from_its_signed_result_and_both_views_show_the_graph()
 {
    let p = pair().await;
    let (a, b) = (p.a.admin(), p.b.admin());
    let (parent, status, reply) = call(&a, "cap:b:echo", json!({ "hello": "peer" })).await;
    assert_eq!(status, 200, "{reply}");
    let result = &reply["body"]["action_result"];
    assert_eq!(result["status"], "completed", "{reply}");
    assert_eq!(result["output"]["hello"], "peer");
    let (delegation_id, child) = aip_runtime::delegation::ids_of("default", &parent);
    let (_, parent_view) = a
        .get(&format!("/aip/v1/actions/{parent}?include_receipts=true"))
        .await;
    let made: Vec<&Value> = parent_view["receipt_chain"]["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["receipt_type"] == "delegation_made")
        .collect();
    assert_eq!(made.len(), 1, "{parent_view}");
    assert_eq!(made[0]["data"]["child_action_id"], child.as_str());
    assert_eq!(
        parent_view["delegation_id"],
        delegation_id.as_str(),
        "{parent_view}"
    );
    assert_eq!(
        parent_view["links"]["delegation_child_action"],
        child.as_str()
    );
    assert_eq!(parent_view["links"]["delegation_peer"], "b");
    let (status, child_view) = b
        .get(&format!("/aip/v1/actions/{child}?include_result=true"))
        .await;
    assert_eq!(status, 200, "{child_view}");
    assert_eq!(child_view["state"], "completed");
    assert_eq!(child_view["delegation_id"], delegation_id.as_str());
    assert_eq!(
        child_view["links"]["delegation_parent_action"],
        parent.as_str()
    );
    assert_eq!(child_view["links"]["delegation_peer"], "a");
    // The same parent again (a re-send) re-attaches to the same child: B ran it once.
    let (_, again) = a
        .act(json!({ "id": parent, "capability_id": "cap:b:echo", "input": { "hello": "peer" } }))
        .await;
    assert_eq!(again["body"]["action_result"]["output"]["hello"], "peer");
    let (_, list) = b.get("/aip/v1/actions?capability_id=cap:demo:echo").await;
    assert_eq!(list["actions"].as_array().unwrap().len(), 1, "{list}");
}

#[tokio::test]
async fn a_wrong_key_a_narrow_scope_a_loop_and_an_overlong_chain_are_each_refused() {
    let p = pair().await;
    let a = p.a.admin();
    // A pins a key B does not hold: B refuses a request addressed to another key.
    let (_, _, reply) = call(&a, "cap:b:impostor", json!({ "x": 1 })).await;
    assert_eq!(
        error_code(&reply),
        "aip.delegation.peer_mismatch",
        "{reply}"
    );
    // A peer answering "completed" under a key A did not pin: never taken as the child's result.
    let (_, _, reply) = call(&a, "cap:f:echo", json!({ "x": 1 })).await;
    assert_eq!(
        error_code(&reply),
        "aip.delegation.peer_unauthenticated",
        "{reply}"
    );
    assert!(
        reply["body"]["action_result"]["output"].is_null(),
        "{reply}"
    );
    // The delegated scope does not cover the child's capability.
    let (_, reply) = a
        .act(
            json!({ "id": id("act_"), "capability_id": "cap:b:book", "idempotency_key": id("key_"),
                     "input": { "name": "Ada", "party_size": 2, "time": "19:00" } }),
        )
        .await;
    assert_eq!(
        error_code(&reply),
        "aip.delegation.scope_insufficient",
        "{reply}"
    );
    // A → B → A: A refuses the chain it already appears in.
    let (_, _, reply) = call(&a, "cap:b:loop", json!({ "x": 1 })).await;
    assert_eq!(error_code(&reply), "aip.delegation.loop", "{reply}");

    // Straight to B: an unknown signer is not a peer.
    let stranger = aip_core::signing::generate_signing_key();
    let b_base = format!("http://{}", p.b.base);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let send = |key: SigningKey, body: Value| {
        let http = http.clone();
        let url = format!("{b_base}/aip/v1/messages");
        async move {
            let env: aip_core::Envelope =
                serde_json::from_value(envelope("aip.agent.v1.delegation_request", body)).unwrap();
            let signed = aip_core::signing::sign_envelope(&env, &key).unwrap();
            let r = http
                .post(url)
                .header("content-type", "application/aip+json")
                .body(signed.to_string())
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (_, b_manifest) = p.b.admin().get("/aip/v1/manifest").await;
    let b_did = b_manifest["agent"]["did"].as_str().unwrap().to_owned();
    let a_did = aip_core::signing::did_key(&p.a_key.verifying_key());
    let me = json!({ "id": "agent:aip-local", "kind": "agent", "did": a_did, "trust_domain": "a.example" });
    let them =
        json!({ "id": "peer:b", "kind": "agent", "did": b_did, "trust_domain": "b.example" });
    let entry = |from: &Value, to: &Value| json!({ "from": from, "to": to, "scope": "invoke:cap:demo:echo", "delegated_at": aip_core::Timestamp::now() });
    let request = |chain: Vec<Value>| {
        let child = id("act_");
        json!({ "delegation_request": {
            "delegation_id": id("dlg_"), "parent_action_id": id("act_"),
            "child_action": { "id": child, "capability_id": "cap:demo:echo", "input": {}, "delegation_chain": chain },
            "requested_by": me, "delegate": them, "scope": "invoke:cap:demo:echo",
            "metadata": { "contract_digest": aip_runtime::delegation::contract_digest(serde_json::from_value(b_manifest["capabilities"].as_array().unwrap().iter().find(|c| c["id"] == "cap:demo:echo").unwrap()["contract"].clone()).ok().as_ref()) },
        } })
    };
    let (status, reply) = send(stranger, request(vec![entry(&me, &them)])).await;
    assert_eq!(status, 401, "{reply}");
    // Eleven entries: too long, whoever sends it.
    let other = |n: usize| json!({ "id": format!("agent:{n}"), "kind": "agent", "did": aip_core::signing::did_key(&aip_core::signing::generate_signing_key().verifying_key()), "trust_domain": "x.example" });
    let mut chain: Vec<Value> = (0..10).map(|n| entry(&other(n), &other(n + 1))).collect();
    chain.push(entry(&me, &them));
    let (status, reply) = send(p.a_key.clone(), request(chain)).await;
    // The decoder bounds every chain at ten entries (spec 14.3), before any delegation logic.
    assert_eq!(
        reply["body"]["error"]["error"]["code"], "aip.semantic.delegation_chain_too_long",
        "{status} {reply}"
    );
    // A hop that widens what it received.
    let mut wide = entry(&me, &them);
    wide["scope"] = json!("invoke:*");
    let mut narrow = entry(&other(1), &me);
    narrow["scope"] = json!("invoke:cap:demo:echo");
    let mut body = request(vec![narrow, wide]);
    body["delegation_request"]["scope"] = json!("invoke:*");
    let (_, reply) = send(p.a_key.clone(), body).await;
    assert_eq!(
        reply["body"]["error"]["error"]["code"], "aip.delegation.scope_widened",
        "{reply}"
    );
    // The honest request is admitted and answered with B's signature.
    let (status, reply) = send(p.a_key.clone(), request(vec![entry(&me, &them)])).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["message_type"], "aip.agent.v1.delegation_result");
    assert_eq!(aip_core::signing::verify_value(&reply).unwrap().did, b_did);
}

#[tokio::test]
async fn a_cancelled_or_expired_parent_stops_its_child_and_an_expired_one_is_uncertain() {
    let p = pair().await;
    let (a, b) = (p.a.admin(), p.b.admin());
    let parent = id("act_");
    let (status, reply) = a
        .act(json!({ "id": parent, "capability_id": "cap:b:sleep", "mode": "async", "input": { "ms": 60000 } }))
        .await;
    assert_eq!(status, 202, "{reply}");
    let (_, child) = aip_runtime::delegation::ids_of("default", &parent);
    let mut running = false;
    for _ in 0..200 {
        let (status, view) = b.get(&format!("/aip/v1/actions/{child}")).await;
        if status == 200 && view["state"] == "running" {
            running = true;
            break;
        }
        pause(50).await;
    }
    assert!(running, "the child runs on B");
    let (status, reply) = a
        .post(&format!("/aip/v1/actions/{parent}/cancel"), &json!({}))
        .await;
    assert_eq!(status, 202, "{reply}");
    let parent_view = a.wait_terminal(&parent).await;
    assert_eq!(parent_view["state"], "cancelled", "{parent_view}");
    let child_view = b.wait_terminal(&child).await;
    assert_eq!(child_view["state"], "cancelled", "{child_view}");

    // A parent whose deadline passes while its child runs does not claim an outcome: it is
    // uncertain, names the child, and the child is asked to stop.
    let parent = id("act_");
    let (status, reply) = a
        .act(json!({ "id": parent, "capability_id": "cap:b:sleep", "mode": "async", "timeout_ms": 2000,
                     "input": { "ms": 60000 } }))
        .await;
    assert_eq!(status, 202, "{reply}");
    let view = a.wait_terminal(&parent).await;
    let error = &view["result"]["error"];
    assert_eq!(error["code"], "aip.connector.uncertain_outcome", "{view}");
    let (_, child) = aip_runtime::delegation::ids_of("default", &parent);
    assert!(
        error["message"].as_str().unwrap().contains(&child),
        "{view}"
    );
    let child_view = b.wait_terminal(&child).await;
    assert_eq!(child_view["state"], "cancelled", "{child_view}");
    // The follow-up asks the peer again and records what the child did (spec 14.5).
    let reconciled = reconciled_event(&a, &parent).await;
    assert_eq!(
        reconciled["data"]["outcome"], "not_completed",
        "{reconciled}"
    );
    assert_eq!(reconciled["data"]["child_action_id"], child.as_str());
}

#[tokio::test]
async fn a_capability_is_delegated_to_a_peer_over_nats_and_completes_from_its_signed_result() {
    let Some(url) = nats_url("delegation over NATS") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let a_did = key_file(
        &a_dir.join("node.key"),
        &aip_core::signing::generate_signing_key(),
    );
    let b_did = key_file(
        &b_dir.join("node.key"),
        &aip_core::signing::generate_signing_key(),
    );
    // Subjects of their own on the shared NATS server.
    let (a_domain, b_domain) = (
        format!("a{}.example", id("")),
        format!("b{}.example", id("")),
    );
    let b_prefix = format!("aip.v1.{}.aip.v1", b_domain.replace('.', "_"));
    let b = start(
        &b_dir,
        free_port(),
        &format!(
            "node_key_file = \"{}\"\n[nats]\nurl = \"{url}\"\ntrust_domain = \"{b_domain}\"\n\n\
             [delegation]\ntrust_domain = \"b.example\"\n\n\
             [[peers]]\nname = \"a\"\ndid = \"{a_did}\"\ntrust_domain = \"a.example\"\nscopes = [\"invoke:cap:demo:echo\"]\n",
            b_dir.join("node.key").display()
        ),
    );
    let (_, manifest) = b.admin().get("/aip/v1/manifest").await;
    let echo = manifest["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "cap:demo:echo")
        .unwrap()
        .clone();
    let a = start(
        &a_dir,
        free_port(),
        &format!(
            "node_key_file = \"{}\"\n[nats]\nurl = \"{url}\"\ntrust_domain = \"{a_domain}\"\n\n\
             [delegation]\ntrust_domain = \"a.example\"\n\n\
             [[peers]]\nname = \"b\"\ndid = \"{b_did}\"\ntrust_domain = \"b.example\"\nnats_prefix = \"{b_prefix}\"\n\n{}",
            a_dir.join("node.key").display(),
            routed(
                "cap:b:echo",
                &echo["contract"],
                &echo["input_schema"],
                "b",
                "cap:demo:echo",
                None
            ),
        ),
    );
    let (parent, status, reply) = call(&a.admin(), "cap:b:echo", json!({ "over": "nats" })).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["body"]["action_result"]["output"]["over"], "nats",
        "{reply}"
    );
    let (_, child) = aip_runtime::delegation::ids_of("default", &parent);
    let (status, view) = b.admin().get(&format!("/aip/v1/actions/{child}")).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["links"]["delegation_parent_action"], parent.as_str());
}

#[tokio::test]
async fn a_delegating_node_killed_mid_delegation_re_attaches_to_the_same_child_after_restart() {
    let l = linked("cap:demo:sleep").await;
    let (a_dir, a_port, a_config, b) = (&l.a_dir, l.a_port, &l.a_config, &l.b);
    let mut a = start(a_dir, a_port, a_config);
    let parent = id("act_");
    let (status, reply) = a
        .admin()
        .act(json!({ "id": parent, "capability_id": "cap:b:sleep", "mode": "async", "input": { "ms": 3000 } }))
        .await;
    assert_eq!(status, 202, "{reply}");
    let (_, child) = aip_runtime::delegation::ids_of("default", &parent);
    let mut running = false;
    for _ in 0..200 {
        let (status, view) = b.admin().get(&format!("/aip/v1/actions/{child}")).await;
        if status == 200 && view["state"] == "running" {
            running = true;
            break;
        }
        pause(25).await;
    }
    assert!(running, "the child runs on B");
    a.kill();
    let a = start(a_dir, a_port, a_config);
    let view = a.admin().wait_terminal(&parent).await;
    assert_eq!(view["state"], "completed", "{view}");
    assert_eq!(view["result"]["output"]["slept_ms"], 3000, "{view}");
    let (_, list) = b
        .admin()
        .get("/aip/v1/actions?capability_id=cap:demo:sleep")
        .await;
    assert_eq!(
        list["actions"].as_array().unwrap().len(),
        1,
        "B ran one child: {list}"
    );
}

/// Node B serving `remote` to node A, which routes it as `cap:b:<name>` (A not started yet).
struct Linked {
    _dir: tempfile::TempDir,
    a_dir: std::path::PathBuf,
    b_dir: std::path::PathBuf,
    a_port: u16,
    b_port: u16,
    a_config: String,
    b_config: String,
    b: Server,
}

async fn linked(remote: &str) -> Linked {
    let dir = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let a_did = key_file(
        &a_dir.join("node.key"),
        &aip_core::signing::generate_signing_key(),
    );
    let b_did = key_file(
        &b_dir.join("node.key"),
        &aip_core::signing::generate_signing_key(),
    );
    let b_port = free_port();
    let b_config = format!(
        "node_key_file = \"{}\"\n[delegation]\ntrust_domain = \"b.example\"\n\n\
         [[peers]]\nname = \"a\"\ndid = \"{a_did}\"\ntrust_domain = \"a.example\"\nscopes = [\"invoke:{remote}\"]\n",
        b_dir.join("node.key").display()
    );
    let b = start(&b_dir, b_port, &b_config);
    let (_, manifest) = b.admin().get("/aip/v1/manifest").await;
    let served = manifest["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == remote)
        .unwrap()
        .clone();
    let a_port = free_port();
    let name = remote.rsplit(':').next().unwrap();
    let a_config = format!(
        "node_key_file = \"{}\"\n[limits]\nlease_ms = 2000\n\n[delegation]\ntrust_domain = \"a.example\"\n\n\
         [[peers]]\nname = \"b\"\ndid = \"{b_did}\"\ntrust_domain = \"b.example\"\nurl = \"http://127.0.0.1:{b_port}\"\n\n{}",
        a_dir.join("node.key").display(),
        routed(
            &format!("cap:b:{name}"),
            &served["contract"],
            &served["input_schema"],
            "b",
            remote,
            None
        ),
    );
    Linked {
        _dir: dir,
        a_dir,
        b_dir,
        a_port,
        b_port,
        a_config,
        b_config,
        b,
    }
}

/// `server`'s demo approver `n` (its token file in the data directory).
fn approver(server: &Server, dir: &Path, n: u32) -> Client {
    let token = std::fs::read_to_string(dir.join(format!("data/approver-{n}.token"))).unwrap();
    server.client(token.trim())
}

#[tokio::test]
async fn an_approved_write_whose_peer_dies_before_the_deadline_is_uncertain_and_later_records_the_childs_outcome()
 {
    let mut l = linked("cap:demo:transfer").await;
    let a = start(&l.a_dir, l.a_port, &l.a_config);
    let parent = id("act_");
    let (status, reply) = a
        .admin()
        .act(json!({ "id": parent, "capability_id": "cap:b:transfer", "mode": "async", "timeout_ms": 6000,
                     "input": { "amount_minor": 500, "to": "acct:bob" } }))
        .await;
    assert_eq!(status, 202, "{reply}");
    // Approved here, then the child waits for its own approval on B.
    let approval = reply["extensions"]["approval"]["approval_id"]
        .as_str()
        .unwrap();
    let (status, granted) = approver(&a, &l.a_dir, 1)
        .post(
            &format!("/aip/v1/approvals/{approval}/decision"),
            &json!({ "decision": "approved" }),
        )
        .await;
    assert_eq!(status, 200, "{granted}");
    let (_, child) = aip_runtime::delegation::ids_of("default", &parent);
    let mut waiting = false;
    for _ in 0..200 {
        let (status, view) = l.b.admin().get(&format!("/aip/v1/actions/{child}")).await;
        if status == 200 && view["state"] == "pending_approval" {
            waiting = true;
            break;
        }
        pause(25).await;
    }
    assert!(waiting, "the child waits for approval on B");
    // B dies before the parent's deadline: the parent retries within the time left, then ends
    // uncertain (it cannot know whether the child ran), never expired.
    l.b.kill();
    let view = a.admin().wait_terminal(&parent).await;
    assert_eq!(view["state"], "failed", "{view}");
    assert_eq!(
        view["result"]["error"]["code"], "aip.connector.uncertain_outcome",
        "{view}"
    );
    // B comes back and its approver grants the child, which runs there; A's follow-up asks B
    // again and records the child's definitive outcome on the parent.
    let b = start(&l.b_dir, l.b_port, &l.b_config);
    let (_, child_view) = b.admin().get(&format!("/aip/v1/actions/{child}")).await;
    let child_approval = child_view["approval_id"].as_str().unwrap().to_owned();
    let (status, granted) = approver(&b, &l.b_dir, 1)
        .post(
            &format!("/aip/v1/approvals/{child_approval}/decision"),
            &json!({ "decision": "approved" }),
        )
        .await;
    assert_eq!(status, 200, "{granted}");
    assert_eq!(b.admin().wait_terminal(&child).await["state"], "completed");
    let reconciled = reconciled_event(&a.admin(), &parent).await;
    assert_eq!(reconciled["data"]["outcome"], "completed", "{reconciled}");
    assert_eq!(reconciled["data"]["child_action_id"], child.as_str());
}

/// The parent's `aip.delegation.reconciled` event, once the follow-up wrote it (null after 30 s).
async fn reconciled_event(a: &Client, parent: &str) -> Value {
    for _ in 0..300 {
        let (_, events) = a.get(&format!("/aip/v1/actions/{parent}/events")).await;
        if let Some(e) = events["events"].as_array().and_then(|list| {
            list.iter()
                .find(|e| e["kind"] == "aip.delegation.reconciled")
        }) {
            return e.clone();
        }
        pause(100).await;
    }
    Value::Null
}
