//! Semantic-rule cases: envelopes that satisfy the JSON Schemas but break a MUST of the spec text.
//! Each case names its rule; the decoder must reject it with that rule's code and the member's
//! pointer, and every rule of `Rule::ALL` must have a case.
#![allow(clippy::unwrap_used)]

use std::collections::HashSet;

use aip_core::*;
use serde_json::{Value, json};

fn envelope(mt: &str, key: &str, body: Value) -> Value {
    json!({
        "aip_version": "1.0",
        "message_type": mt,
        "message_id": "msg_1",
        "sent_at": "2026-07-14T08:30:00Z",
        "body": { key: body }
    })
}

fn principal(id: &str) -> Value {
    json!({"id": id, "kind": "agent"})
}

fn action() -> Value {
    json!({"id": "act_1", "capability_id": "cap:x", "input": {"a": 1}})
}

fn contract() -> Value {
    json!({
        "side_effects": ["write"],
        "idempotency": {"requirement": "required", "collision_behavior": "reject_conflict", "key_scope": "tenant", "ttl_ms": 1000},
        "execution": {"supports_sync": true, "supports_async": false, "supports_streaming": false, "supports_cancel": false,
                      "supports_retry": false, "expected_completion": "sync", "retry_safety": "unsafe"},
        "data": {"sensitivity": "internal", "contains_pii": false, "redaction_required": false}
    })
}

fn manifest() -> Value {
    json!({
        "manifest_version": "aip-manifest/v1",
        "agent": principal("agent:a"),
        "profiles": ["aip-native"],
        "capabilities": [{"id": "cap:x", "name": "X", "kind": "tool", "input_schema": {"type": "object"}, "contract": contract()}]
    })
}

fn chunk(seq: u64, text: &str) -> Value {
    json!({"action_id": "act_1", "sequence": seq, "kind": "data", "data": {"t": text}})
}

fn plan() -> Value {
    json!({
        "plan_id": "plan_1", "transaction_id": "txn_1", "action_id": "act_1", "capability_id": "cap:x",
        "transaction": {"mode": "plan", "transaction_id": "txn_1"}, "planned_by": principal("p"),
        "input_hash": "ab", "approval_required": false, "created_at": "2026-07-14T08:30:00Z"
    })
}

fn tx_result(status: &str) -> Value {
    json!({"transaction_id": "txn_1", "action_id": "act_1", "capability_id": "cap:x",
           "transaction": {"mode": "plan", "transaction_id": "txn_1"}, "status": status})
}

fn decision(kind: &str) -> Value {
    json!({"approval_id": "apr_1", "decision": kind, "approver": principal("user:approver"),
           "decided_at": "2026-07-14T08:30:00Z"})
}

fn entry(from: &str, to: &str) -> Value {
    json!({"from": principal(from), "to": principal(to), "scope": "s", "delegated_at": "2026-07-14T08:30:00Z"})
}

/// (rule, what breaks it, envelope, pointer of the offending member)
fn cases() -> Vec<(Rule, &'static str, Value, &'static str)> {
    let act = |f: &dyn Fn(&mut Value)| {
        let mut a = action();
        f(&mut a);
        envelope("aip.core.v1.action", "action", a)
    };
    let man = |f: &dyn Fn(&mut Value)| {
        let mut m = manifest();
        f(&mut m);
        envelope("aip.discovery.v1.manifest_response", "manifest", m)
    };
    let long_chain: Vec<Value> = (0..11)
        .map(|i| entry(&format!("p{i}"), &format!("p{}", i + 1)))
        .collect();
    vec![
        (
            Rule::Timestamp,
            "5.2 sent_at is not RFC 3339",
            {
                let mut e = envelope("aip.core.v1.action", "action", action());
                e["sent_at"] = json!("2026-07-14 08:30");
                e
            },
            "/sent_at",
        ),
        (
            Rule::Timestamp,
            "5.2 nested timestamp is not RFC 3339",
            envelope(
                "aip.core.v1.heartbeat_ack",
                "heartbeat_ack",
                json!({"sequence": 1, "received_at": "noon"}),
            ),
            "/body/heartbeat_ack/received_at",
        ),
        (
            Rule::EmptyIdentifier,
            "8.1 principal id is empty",
            {
                let mut e = envelope("aip.core.v1.action", "action", action());
                e["from"] = json!({"id": "", "kind": "human"});
                e
            },
            "/from/id",
        ),
        (
            Rule::TypeMismatch,
            "6.1 built in code only; decoding reports aip.envelope.type_mismatch",
            Value::Null,
            "",
        ),
        (
            Rule::EmptyMessageId,
            "6.4 message_id is empty",
            {
                let mut e = envelope("aip.core.v1.action", "action", action());
                e["message_id"] = json!("");
                e
            },
            "/message_id",
        ),
        (
            Rule::EmptyIdempotencyKey,
            "6.4 idempotency_key is empty",
            {
                let mut e = envelope("aip.core.v1.action", "action", action());
                e["idempotency_key"] = json!("");
                e
            },
            "/idempotency_key",
        ),
        (
            Rule::ManifestVersion,
            "9.1 wrong manifest_version",
            man(&|m| m["manifest_version"] = json!("aip-manifest/v2")),
            "/body/manifest/manifest_version",
        ),
        (
            Rule::EmptyProfiles,
            "9.1 empty profiles",
            man(&|m| m["profiles"] = json!([])),
            "/body/manifest/profiles",
        ),
        (
            Rule::DuplicateCapabilityId,
            "9.1 repeated capability id",
            man(&|m| {
                let c = m["capabilities"][0].clone();
                m["capabilities"].as_array_mut().unwrap().push(c);
            }),
            "/body/manifest/capabilities/1/id",
        ),
        (
            Rule::InputSchemaNotObject,
            "9.3 input schema is not an object schema",
            man(&|m| m["capabilities"][0]["input_schema"] = json!({"type": "string"})),
            "/body/manifest/capabilities/0/input_schema",
        ),
        (
            Rule::NoSideEffects,
            "9.4 no side effects",
            man(&|m| m["capabilities"][0]["contract"]["side_effects"] = json!([])),
            "/body/manifest/capabilities/0/contract/side_effects",
        ),
        (
            Rule::NoExecutionMode,
            "9.4 no execution mode",
            man(&|m| m["capabilities"][0]["contract"]["execution"]["supports_sync"] = json!(false)),
            "/body/manifest/capabilities/0/contract/execution",
        ),
        (
            Rule::CompensationWithoutCapability,
            "9.4 supported compensation without capability",
            man(&|m| {
                m["capabilities"][0]["contract"]["compensation"] =
                    json!({"mode": "supported", "requires_approval": false})
            }),
            "/body/manifest/capabilities/0/contract/compensation/compensation_capability_id",
        ),
        (
            Rule::NoTransactionModes,
            "9.4 transaction contract without modes",
            man(
                &|m| m["capabilities"][0]["contract"]["transaction"] = json!({"supported_modes": [], "requires_plan_before_commit": true, "dry_run_fidelity": "schema_only"}),
            ),
            "/body/manifest/capabilities/0/contract/transaction/supported_modes",
        ),
        (
            Rule::NonPositiveDuration,
            "9.4 zero idempotency ttl",
            man(&|m| m["capabilities"][0]["contract"]["idempotency"]["ttl_ms"] = json!(0)),
            "/body/manifest/capabilities/0/contract/idempotency/ttl_ms",
        ),
        (
            Rule::NullInput,
            "11.1 null input",
            act(&|a| a["input"] = Value::Null),
            "/body/action/input",
        ),
        (
            Rule::ZeroTimeout,
            "11.1 zero timeout",
            act(&|a| a["timeout_ms"] = json!(0)),
            "/body/action/timeout_ms",
        ),
        (
            Rule::ApprovalNotApproved,
            "12.4 action carried by a denied decision",
            act(&|a| a["approval"] = decision("denied")),
            "/body/action/approval/decision",
        ),
        (
            Rule::StreamSequence,
            "11.6 sequence goes backwards",
            envelope(
                "aip.lifecycle.v1.action_events",
                "action_events",
                json!({"action_id": "act_1", "events": [], "terminal": false, "chunks": [chunk(2, "a"), chunk(1, "b")]}),
            ),
            "/body/action_events/chunks/1/sequence",
        ),
        (
            Rule::StreamSequence,
            "11.6 sequence reused for different content",
            envelope(
                "aip.lifecycle.v1.action_status",
                "action_status",
                json!({"action_id": "act_1", "state": "streaming", "updated_at": "2026-07-14T08:30:00Z",
                       "chunks": [chunk(1, "a"), chunk(1, "b")]}),
            ),
            "/body/action_status/chunks/1/sequence",
        ),
        (
            Rule::OutOfScope,
            "16.5 event of another action",
            envelope(
                "aip.lifecycle.v1.action_events",
                "action_events",
                json!({"action_id": "act_1", "terminal": true,
                "events": [{"id": "evt_1", "kind": "aip.action.completed", "occurred_at": "2026-07-14T08:30:00Z", "action_id": "act_2"}]}),
            ),
            "/body/action_events/events/0/action_id",
        ),
        (
            Rule::FailedWithoutError,
            "11.7 failed result without error",
            envelope(
                "aip.core.v1.action_result",
                "action_result",
                json!({"action_id": "act_1", "status": "failed"}),
            ),
            "/body/action_result/error",
        ),
        (
            Rule::CommitWithoutPlan,
            "13.1 commit without plan_id",
            act(&|a| a["transaction"] = json!({"mode": "commit"})),
            "/body/action/transaction/plan_id",
        ),
        (
            Rule::CompensateWithoutTarget,
            "13.1 compensate without compensation_for",
            act(&|a| a["transaction"] = json!({"mode": "compensate"})),
            "/body/action/transaction/compensation_for",
        ),
        (
            Rule::TransactionIdMismatch,
            "13.1 request id differs from the action's",
            envelope(
                "aip.transaction.v1.request",
                "transaction_request",
                json!({"transaction_id": "txn_1", "requested_by": principal("p"),
                "action": {"id": "act_1", "capability_id": "cap:x", "input": {}, "transaction": {"mode": "execute", "transaction_id": "txn_2"}}}),
            ),
            "/body/transaction_request/transaction_id",
        ),
        (
            Rule::PlanMismatch,
            "13.3 plan action id differs from the result's",
            {
                let mut r = tx_result("planned");
                let mut p = plan();
                p["action_id"] = json!("act_9");
                r["plan"] = p;
                envelope("aip.transaction.v1.result", "transaction_result", r)
            },
            "/body/transaction_result/plan/action_id",
        ),
        (
            Rule::PlanMismatch,
            "13.3 planned result without a plan",
            envelope(
                "aip.transaction.v1.result",
                "transaction_result",
                tx_result("planned"),
            ),
            "/body/transaction_result/plan",
        ),
        (
            Rule::FailedTransactionWithoutError,
            "13.5 failed transaction without an error",
            envelope(
                "aip.transaction.v1.result",
                "transaction_result",
                tx_result("failed"),
            ),
            "/body/transaction_result/error",
        ),
        (
            Rule::DelegationToSelf,
            "14.1 parent is the child",
            envelope(
                "aip.agent.v1.delegation_request",
                "delegation_request",
                json!({"delegation_id": "dlg_1", "parent_action_id": "act_1",
                "child_action": action(), "requested_by": principal("a"), "delegate": principal("b"), "scope": "s"}),
            ),
            "/body/delegation_request/child_action/id",
        ),
        (
            Rule::EmptyScope,
            "14.1 empty scope",
            envelope(
                "aip.agent.v1.delegation_request",
                "delegation_request",
                json!({"delegation_id": "dlg_1", "parent_action_id": "act_0",
                "child_action": action(), "requested_by": principal("a"), "delegate": principal("b"), "scope": ""}),
            ),
            "/body/delegation_request/scope",
        ),
        (
            Rule::DelegationChainTooLong,
            "14.3 eleven entries",
            act(&|a| a["delegation_chain"] = json!(long_chain.clone())),
            "/body/action/delegation_chain",
        ),
        (
            Rule::DelegationLoop,
            "14.3 a -> b -> a",
            act(&|a| a["delegation_chain"] = json!([entry("a", "b"), entry("b", "a")])),
            "/body/action/delegation_chain/1",
        ),
        (
            Rule::TerminalWithoutOutcome,
            "14.4 completed delegation without result or error",
            envelope(
                "aip.agent.v1.delegation_result",
                "delegation_result",
                json!({"delegation_id": "dlg_1", "parent_action_id": "act_0",
                "child_action_id": "act_1", "status": "completed"}),
            ),
            "/body/delegation_result/result",
        ),
        (
            Rule::ListLimit,
            "16.4 limit 0",
            envelope(
                "aip.lifecycle.v1.action_list_request",
                "action_list_request",
                json!({"limit": 0}),
            ),
            "/body/action_list_request/limit",
        ),
        (
            Rule::ListLimit,
            "16.4 limit 1001",
            envelope(
                "aip.session.v1.session_list_request",
                "session_list_request",
                json!({"limit": 1001}),
            ),
            "/body/session_list_request/limit",
        ),
        (
            Rule::TooManyRecords,
            "16.4 1001 records",
            envelope(
                "aip.discovery.v1.event_stream_response",
                "event_stream",
                json!({"events": (0..1001).map(|i| json!({
                "id": format!("evt_{i}"), "kind": "k", "occurred_at": "2026-07-14T08:30:00Z"})).collect::<Vec<_>>()}),
            ),
            "/body/event_stream/events",
        ),
        (
            Rule::WaitTooLong,
            "16.4 wait over 30 s",
            envelope(
                "aip.lifecycle.v1.action_status_request",
                "action_status_request",
                json!({"action_id": "act_1", "wait_ms": 30001}),
            ),
            "/body/action_status_request/wait_ms",
        ),
        (
            Rule::MissingRootHash,
            "18.2 non-empty chain without root",
            envelope(
                "aip.audit.v1.receipt_chain",
                "receipt_chain",
                json!({"chain_id": "c", "receipts": [{"id": "rcpt_1",
                "receipt_type": "action_accepted", "actor": principal("p"), "occurred_at": "2026-07-14T08:30:00Z", "hash": "ab"}]}),
            ),
            "/body/receipt_chain/root_hash",
        ),
        (
            Rule::EmptyErrorCode,
            "19.1 empty error code",
            envelope(
                "aip.core.v1.error",
                "error",
                json!({"error": {"code": "", "message": "m", "category": "permanent"}}),
            ),
            "/body/error/error/code",
        ),
        (
            Rule::EmptyPurpose,
            "10.1 empty purpose",
            envelope(
                "aip.core.v1.handshake",
                "handshake",
                json!({"client": principal("c"), "purpose": "", "profiles": ["aip-native"]}),
            ),
            "/body/handshake/purpose",
        ),
        (
            Rule::PartWithoutContent,
            "15.2 image without url or data",
            envelope(
                "aip.core.v1.stream_chunk",
                "stream_chunk",
                json!({"action_id": "act_1", "sequence": 0, "kind": "data",
                "part": {"type": "image", "mime_type": "image/png"}}),
            ),
            "/body/stream_chunk/part",
        ),
    ]
}

#[test]
fn every_semantic_rule_rejects_its_case_with_its_code_and_pointer() {
    let mut covered = HashSet::new();
    for (rule, what, env, pointer) in cases() {
        covered.insert(rule);
        if env.is_null() {
            continue;
        }
        let e = decode_envelope(&serde_json::to_vec(&env).unwrap(), &Limits::default())
            .expect_err(&format!("{what}: should be rejected"));
        assert_eq!(e.code(), rule.code(), "{what}: {e}");
        assert_eq!(e.pointer(), pointer, "{what}");
        assert!(!e.is_schema_layer(), "{what}: must pass the schema layer");
    }
    for rule in Rule::ALL {
        assert!(covered.contains(rule), "no case for {rule}");
    }
}

#[test]
fn the_valid_baselines_of_the_semantic_cases_are_accepted() {
    let ok = [
        envelope("aip.core.v1.action", "action", action()),
        envelope("aip.discovery.v1.manifest_response", "manifest", manifest()),
        envelope(
            "aip.lifecycle.v1.action_events",
            "action_events",
            json!({"action_id": "act_1", "events": [], "terminal": false, "chunks": [chunk(1, "a"), chunk(1, "a"), chunk(2, "b")]}),
        ),
        envelope("aip.transaction.v1.result", "transaction_result", {
            let mut r = tx_result("planned");
            r["plan"] = plan();
            r
        }),
        envelope("aip.core.v1.action", "action", {
            let mut a = action();
            a["delegation_chain"] = json!([entry("a", "b"), entry("b", "c")]);
            a["transaction"] = json!({"mode": "commit", "plan_id": "plan_1"});
            a["timeout_ms"] = json!(1);
            a["approval"] = decision("approved");
            a
        }),
        envelope(
            "aip.lifecycle.v1.action_list_request",
            "action_list_request",
            json!({"limit": 1000}),
        ),
        envelope(
            "aip.lifecycle.v1.action_status_request",
            "action_status_request",
            json!({"action_id": "a", "wait_ms": 30000}),
        ),
    ];
    for env in ok {
        let r = decode_envelope(&serde_json::to_vec(&env).unwrap(), &Limits::default());
        assert!(r.is_ok(), "{env}: {r:?}");
    }
}

#[test]
fn duplicate_delivery_of_the_same_chunk_is_tolerated_but_reported_errors_list_every_violation() {
    let mut a = action();
    a["timeout_ms"] = json!(0);
    a["input"] = Value::Null;
    let e = decode_envelope(
        &serde_json::to_vec(&envelope("aip.core.v1.action", "action", a)).unwrap(),
        &Limits::default(),
    )
    .unwrap_err();
    let codes: Vec<&str> = e.violations().iter().map(|v| v.rule.code()).collect();
    assert_eq!(
        codes,
        ["aip.semantic.null_input", "aip.semantic.zero_timeout"]
    );
    let pe = e.to_protocol_error();
    assert_eq!(
        pe.details.unwrap()["violations"].as_array().unwrap().len(),
        2
    );
}

#[test]
fn an_action_is_authorized_only_by_an_approved_decision() {
    for kind in ApprovalDecisionKind::ALL {
        let mut a = action();
        a["approval"] = decision(kind.as_str());
        let env = envelope("aip.core.v1.action", "action", a);
        let r = decode_envelope(&serde_json::to_vec(&env).unwrap(), &Limits::default());
        match kind {
            ApprovalDecisionKind::Approved => assert!(r.is_ok(), "{kind}: {r:?}"),
            _ => {
                let e = r.expect_err(kind.as_str());
                assert_eq!(e.code(), "aip.semantic.approval_not_approved", "{kind}");
                assert_eq!(e.pointer(), "/body/action/approval/decision", "{kind}");
            }
        }
    }
}
