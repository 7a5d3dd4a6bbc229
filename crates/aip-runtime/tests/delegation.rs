//! The receiving side of delegation (spec 14.2-14.3) at the runtime's entry point: a configured
//! peer's signed `delegation_request` is admitted and answered with a signed result; every chain
//! and request the policy refuses is answered with its typed error and admits nothing.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use aip_runtime::Caller;
use aip_runtime::delegation::{DelegationPolicy, Peer, contract_digest};
use ed25519_dalek::SigningKey;
use serde_json::{Value, json};
use support::{Harness, caller, code, envelope, id, runtime_config, send};

struct Node {
    h: Harness,
    peer_key: SigningKey,
    peer: Caller,
    me: Value,
    them: Value,
    digest: String,
}

/// This node (with its own key, in region `eu-west`) and one peer, `a`, whose requests act as
/// `peer:a` in tenant `t1`; chains of at most 3 entries; `forbidden.example` forbidden.
async fn node() -> Node {
    let key = aip_core::signing::generate_signing_key();
    let peer_key = aip_core::signing::generate_signing_key();
    let peer_did = aip_core::signing::did_key(&peer_key.verifying_key());
    let mut config = runtime_config(2, 30_000);
    config.agent.did = Some(aip_core::signing::did_key(&key.verifying_key()));
    config.agent.trust_domain = Some("b.example".into());
    config.node_key = Some(Arc::new(key));
    config
        .signatures
        .trusted_signers
        .insert(peer_did.clone(), "peer:a".into());
    config.delegation = DelegationPolicy {
        max_chain: 3,
        forbidden_trust_domains: ["forbidden.example".to_owned()].into(),
        region: Some("eu-west".into()),
        peers: vec![Peer {
            name: "a".into(),
            did: peer_did.clone(),
            trust_domain: "a.example".into(),
            principal: "peer:a".into(),
        }],
        ..DelegationPolicy::default()
    };
    let me = serde_json::to_value(&config.agent).unwrap();
    let h = Harness::start_with(config).await;
    let mut peer = caller("peer:a", "t1", &["invoke:cap:demo:echo"]);
    peer.issuer = peer_did.clone();
    let (_, manifest) = h
        .send(
            &caller("svc:admin", "t1", &["*"]),
            &envelope(
                "aip.discovery.v1.manifest_request",
                json!({ "manifest_request": {} }),
            ),
        )
        .await;
    let echo = manifest["body"]["manifest"]["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "cap:demo:echo")
        .unwrap()
        .clone();
    let digest = contract_digest(
        serde_json::from_value(echo["contract"].clone())
            .ok()
            .as_ref(),
    );
    Node {
        h,
        peer_key,
        peer,
        them: me,
        me: json!({ "id": "agent:a", "kind": "agent", "did": peer_did, "trust_domain": "a.example" }),
        digest,
    }
}

fn entry(from: &Value, to: &Value, scope: &str) -> Value {
    json!({ "from": from, "to": to, "scope": scope, "delegated_at": aip_core::Timestamp::now() })
}

impl Node {
    /// A delegation request of `cap:demo:echo` with `chain` (this hop last).
    fn request(&self, chain: Vec<Value>) -> Value {
        json!({ "delegation_request": {
            "delegation_id": id("dlg_"), "parent_action_id": id("act_"),
            "child_action": { "id": id("act_"), "capability_id": "cap:demo:echo", "input": { "n": 1 }, "delegation_chain": chain },
            "requested_by": self.me, "delegate": self.them, "scope": "invoke:cap:demo:echo",
            "metadata": { "contract_digest": self.digest, "wait_ms": 2000 },
        } })
    }

    fn hop(&self) -> Value {
        entry(&self.me, &self.them, "invoke:cap:demo:echo")
    }

    /// Sends `body` signed by the peer's key.
    async fn send(&self, body: Value) -> (u16, Value) {
        let mut env = envelope("aip.agent.v1.delegation_request", body);
        aip_core::signing::sign_value(&mut env, &self.peer_key).unwrap();
        send(&self.h.runtime, &self.peer, &env).await
    }

    async fn admitted(&self, body: &Value) -> bool {
        let child = body["delegation_request"]["child_action"]["id"]
            .as_str()
            .unwrap();
        self.h
            .runtime
            .store()
            .get_action("t1", child)
            .await
            .unwrap()
            .is_some()
    }
}

#[tokio::test]
async fn a_peers_signed_request_is_admitted_as_its_principal_and_answered_with_a_signed_result() {
    let n = node().await;
    let body = n.request(vec![n.hop()]);
    let (status, reply) = n.send(body.clone()).await;
    assert_eq!(status, 200, "{reply}");
    let result = &reply["body"]["delegation_result"];
    assert_eq!(result["status"], "completed", "{reply}");
    assert_eq!(result["result"]["output"]["n"], 1);
    let signer = aip_core::signing::verify_value(&reply).unwrap();
    assert_eq!(Some(signer.did.as_str()), n.them["did"].as_str());
    let child = body["delegation_request"]["child_action"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let stored =
        n.h.runtime
            .store()
            .get_action("t1", &child)
            .await
            .unwrap()
            .unwrap();
    assert_eq!(stored.principal, "peer:a");
    // A re-send (new message id, same request) answers the same child, run once.
    let (_, again) = n.send(body).await;
    assert_eq!(
        again["body"]["delegation_result"]["child_action_id"],
        child.as_str()
    );
}

#[tokio::test]
async fn refused_chains_and_requests_name_their_error_and_admit_nothing() {
    let n = node().await;
    let other = |d: &str| json!({ "id": format!("agent:{d}"), "kind": "agent", "did": aip_core::signing::did_key(&aip_core::signing::generate_signing_key().verifying_key()), "trust_domain": d });
    let mut cases: Vec<(&str, Value)> = Vec::new();
    // Four entries: above this node's limit of three.
    cases.push((
        "aip.delegation.chain_too_long",
        n.request(vec![
            entry(&other("x.example"), &other("y.example"), "invoke:*"),
            entry(&other("y.example"), &other("z.example"), "invoke:*"),
            entry(&other("z.example"), &n.me, "invoke:*"),
            n.hop(),
        ]),
    ));
    // An entry from two days ago.
    let mut old = n.hop();
    old["delegated_at"] = json!(
        aip_core::Timestamp::from_unix_millis(
            aip_core::Timestamp::now().unix_millis().unwrap() - 2 * 86_400_000
        )
        .unwrap()
    );
    cases.push(("aip.delegation.expired", n.request(vec![old])));
    // Through a forbidden trust domain.
    cases.push((
        "aip.delegation.trust_domain_forbidden",
        n.request(vec![
            entry(&other("forbidden.example"), &n.me, "invoke:cap:demo:echo"),
            n.hop(),
        ]),
    ));
    // This node already in the chain, under another name but with its own key.
    let mut alias = n.them.clone();
    alias["id"] = json!("agent:alias");
    cases.push((
        "aip.delegation.loop",
        n.request(vec![entry(&alias, &n.me, "invoke:cap:demo:echo"), n.hop()]),
    ));
    // A requester that is not the authenticated peer.
    let mut body = n.request(vec![n.hop()]);
    body["delegation_request"]["requested_by"]["did"] = other("q.example")["did"].clone();
    cases.push(("aip.delegation.peer_mismatch", body));
    // No contract stated, or another contract.
    let mut body = n.request(vec![n.hop()]);
    body["delegation_request"]["metadata"]["contract_digest"] = json!("0".repeat(64));
    cases.push(("aip.delegation.contract_mismatch", body));
    // The hop's scope does not cover the capability.
    let mut narrow = n.hop();
    narrow["scope"] = json!("invoke:cap:demo:book");
    let mut body = n.request(vec![narrow]);
    body["delegation_request"]["scope"] = json!("invoke:cap:demo:book");
    cases.push(("aip.delegation.scope_insufficient", body));
    for (expected, body) in cases {
        let (_, reply) = n.send(body.clone()).await;
        assert_eq!(code(&reply), expected, "{reply}");
        assert!(!n.admitted(&body).await, "{expected}: nothing admitted");
    }
    // A chain on a plain action from a principal that is not a peer.
    let bearer = caller("svc:alice", "t1", &["invoke:*"]);
    let child_id = id("act_");
    let (_, reply) = n
        .h
        .act(&bearer, None, json!({ "id": child_id, "capability_id": "cap:demo:echo", "input": {}, "delegation_chain": [n.hop()] }))
        .await;
    assert_eq!(
        code(&reply),
        "aip.delegation.peer_unauthenticated",
        "{reply}"
    );
    assert!(
        n.h.runtime
            .store()
            .get_action("t1", &child_id)
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_chains_tenant_and_region_constraints_bind_where_the_child_runs_and_only_narrow() {
    let n = node().await;
    let origin = json!({ "id": "agent:o", "kind": "agent", "did": aip_core::signing::did_key(&aip_core::signing::generate_signing_key().verifying_key()), "trust_domain": "o.example" });
    let hop = |scope: &str| entry(&n.me, &n.them, scope);
    let two = |first: &str, last: &str| vec![entry(&origin, &n.me, first), hop(last)];
    let echo = "invoke:cap:demo:echo";
    let refused: Vec<(&str, Vec<Value>)> = vec![
        // The peer's requests act in t1 here; the chain allows only t2.
        (
            "aip.delegation.tenant_forbidden",
            vec![hop(&format!("{echo} tenant:t2"))],
        ),
        // This node is in eu-west; the chain allows only us-east.
        (
            "aip.delegation.residency_forbidden",
            vec![hop(&format!("{echo} region:us-east"))],
        ),
        // The origin constrained the region; the last hop dropped it.
        (
            "aip.delegation.scope_widened",
            two("invoke:* region:eu-west", echo),
        ),
        // ... or added another region.
        (
            "aip.delegation.scope_widened",
            two(
                "invoke:* region:eu-west",
                &format!("{echo} region:eu-west region:us-east"),
            ),
        ),
        // ... or dropped the tenant it named, even if the region stays.
        (
            "aip.delegation.scope_widened",
            two(
                "invoke:* tenant:t1 region:eu-west",
                &format!("{echo} region:eu-west"),
            ),
        ),
        // A constraint label must name something.
        (
            "aip.delegation.chain_invalid",
            vec![hop(&format!("{echo} region:"))],
        ),
    ];
    // The request states the scope of its own hop, the chain's last entry.
    let request = |chain: Vec<Value>| {
        let scope = chain.last().unwrap()["scope"].clone();
        let mut body = n.request(chain);
        body["delegation_request"]["scope"] = scope;
        body
    };
    for (expected, chain) in refused {
        let body = request(chain);
        let (_, reply) = n.send(body.clone()).await;
        assert_eq!(code(&reply), expected, "{reply}");
        assert!(!n.admitted(&body).await, "{expected}: nothing admitted");
    }
    // Kept or narrowed, and naming this node's tenant and region: the child runs.
    let body = request(two(
        "invoke:* tenant:t1 tenant:t9 region:eu-west region:eu-north",
        &format!("{echo} tenant:t1 region:eu-west"),
    ));
    let (status, reply) = n.send(body.clone()).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["body"]["delegation_result"]["status"], "completed",
        "{reply}"
    );
}
