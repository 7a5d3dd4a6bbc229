//! Envelope decoding in spec 6.4 order, with typed errors and JSON pointers.
#![allow(clippy::unwrap_used)]

use aip_core::*;
use serde_json::{Value, json};

fn example() -> Value {
    json!({
      "aip_version": "1.0",
      "message_type": "aip.core.v1.action",
      "message_id": "msg_0190c42f2d5a70008000000000000001",
      "sent_at": "2026-07-14T08:30:00Z",
      "correlation_id": "corr_0190c42f2d5a70008000000000000002",
      "from": {"id": "service:booking-client", "kind": "service"},
      "to": {"id": "agent:restaurant-manager", "kind": "agent"},
      "body": {"action": {
          "id": "act_0190c42f2d5a70008000000000000003",
          "capability_id": "cap:restaurant:booking:create",
          "input": {"name": "Jordan", "party_size": 2, "requested_time": "2026-07-14T19:30:00+04:00"},
          "mode": "sync",
          "idempotency_key": "booking-jordan-20260714-1930"
      }}
    })
}

fn decode(v: &Value) -> Result<Envelope, DecodeError> {
    decode_envelope(&serde_json::to_vec(v).unwrap(), &Limits::default())
}

fn code(v: &Value) -> (String, String) {
    let e = decode(v).unwrap_err();
    (e.code().to_string(), e.pointer().to_owned())
}

#[test]
fn the_spec_6_5_example_decodes_into_typed_values_and_round_trips() {
    let env = decode(&example()).unwrap();
    assert_eq!(env.message_type, MessageType::Action);
    let MessageBody::Action(a) = &env.body else {
        panic!("not an action")
    };
    assert_eq!(a.capability_id.as_str(), "cap:restaurant:booking:create");
    assert_eq!(a.mode, Some(ActionMode::Sync));
    let back: Value = serde_json::from_slice(&env.to_json_vec()).unwrap();
    assert_eq!(back, example());
}

#[test]
fn an_unsupported_version_is_rejected_first() {
    let mut v = example();
    v["aip_version"] = json!("2.0");
    v["message_type"] = json!("aip.nope.v1.x");
    assert_eq!(
        code(&v),
        (
            "aip.envelope.unsupported_version".into(),
            "/aip_version".into()
        )
    );
}

#[test]
fn an_unregistered_message_type_is_an_unsupported_message_error() {
    let mut v = example();
    v["message_type"] = json!("aip.core.v1.nope");
    assert_eq!(
        code(&v),
        (
            "aip.envelope.unsupported_message_type".into(),
            "/message_type".into()
        )
    );
}

#[test]
fn a_body_key_that_does_not_match_the_type_is_a_mismatch() {
    let mut v = example();
    v["message_type"] = json!("aip.core.v1.ack");
    assert_eq!(
        code(&v),
        ("aip.envelope.type_mismatch".into(), "/body".into())
    );
}

#[test]
fn empty_message_id_and_empty_idempotency_key_have_their_own_errors() {
    let mut v = example();
    v["message_id"] = json!("");
    assert_eq!(code(&v).0, "aip.envelope.empty_message_id");
    let mut v = example();
    v["idempotency_key"] = json!("");
    assert_eq!(code(&v).0, "aip.envelope.empty_idempotency_key");
}

#[test]
fn schema_failures_carry_the_pointer_of_the_offending_member() {
    let mut v = example();
    v["body"]["action"]["surprise"] = json!(1);
    assert_eq!(
        code(&v),
        (
            "aip.envelope.schema_violation".into(),
            "/body/action/surprise".into()
        )
    );
    let mut v = example();
    v["body"]["action"]["mode"] = json!("later");
    assert_eq!(
        code(&v),
        (
            "aip.envelope.schema_violation".into(),
            "/body/action/mode".into()
        )
    );
    let mut v = example();
    v["body"]["action"]
        .as_object_mut()
        .unwrap()
        .remove("capability_id");
    assert_eq!(
        code(&v),
        (
            "aip.envelope.schema_violation".into(),
            "/body/action/capability_id".into()
        )
    );
}

#[test]
fn null_on_an_optional_member_is_treated_as_absent() {
    let mut v = example();
    v["session_id"] = Value::Null;
    v["body"]["action"]["mode"] = Value::Null;
    let env = decode(&v).unwrap();
    assert!(env.session_id.is_none());
    let MessageBody::Action(a) = &env.body else {
        panic!()
    };
    assert!(a.mode.is_none());
}

#[test]
fn integral_floats_are_integers_and_out_of_range_numbers_are_limit_errors() {
    let mut v = example();
    v["body"]["action"]["timeout_ms"] = json!(1500.0);
    let env = decode(&v).unwrap();
    let MessageBody::Action(a) = &env.body else {
        panic!()
    };
    assert_eq!(a.timeout_ms, Some(1500));
    v["body"]["action"]["timeout_ms"] = json!(1.5);
    assert_eq!(code(&v).0, "aip.envelope.schema_violation");
    v["body"]["action"]["timeout_ms"] = json!(1e30);
    assert_eq!(
        code(&v),
        (
            "aip.limit.number_range".into(),
            "/body/action/timeout_ms".into()
        )
    );
}

#[test]
fn semantic_rules_run_after_the_schema_and_name_the_rule() {
    let mut v = example();
    v["sent_at"] = json!("yesterday");
    assert_eq!(
        code(&v),
        ("aip.semantic.invalid_timestamp".into(), "/sent_at".into())
    );
    let mut v = example();
    v["body"]["action"]["timeout_ms"] = json!(0);
    assert_eq!(
        code(&v),
        (
            "aip.semantic.zero_timeout".into(),
            "/body/action/timeout_ms".into()
        )
    );
    let mut v = example();
    v["body"]["action"]["input"] = Value::Null;
    let e = decode(&v).unwrap_err();
    assert_eq!(e.code(), "aip.semantic.null_input");
    let pe = e.to_protocol_error();
    assert_eq!(pe.category, ErrorCategory::Permanent);
    assert_eq!(pe.http_status(), 400);
    assert_eq!(pe.pointer(), Some("/body/action/input"));
    assert_eq!(pe.retryable, Some(false));
}

#[test]
fn oversized_and_malformed_input_is_rejected_with_typed_errors() {
    let bytes = serde_json::to_vec(&example()).unwrap();
    let tight = Limits {
        max_bytes: 100,
        ..Limits::default()
    };
    let e = decode_envelope(&bytes, &tight).unwrap_err();
    assert_eq!(
        (e.code().as_str(), e.category()),
        (
            "aip.limit.envelope_bytes",
            aip_core::ErrorCategory::Permanent
        )
    );
    let e = decode_envelope(b"{\"aip_version\":", &Limits::default()).unwrap_err();
    assert_eq!(e.code(), "aip.envelope.malformed_json");
    let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
    assert_eq!(
        decode_envelope(deep.as_bytes(), &Limits::default())
            .unwrap_err()
            .code(),
        "aip.limit.depth"
    );
}

#[test]
fn envelopes_built_in_code_carry_a_fresh_id_time_and_matching_type() {
    let ack = Ack {
        action_id: ActionId::generate(),
        status: AckStatus::Accepted,
        reason: None,
        retry_after_ms: None,
        queue: None,
    };
    let mut req = decode(&example()).unwrap();
    req.session_id = Some(SessionId::generate());
    let reply = Envelope::reply_to(&req, ack);
    assert_eq!(reply.message_type, MessageType::Ack);
    assert!(reply.message_id.as_str().starts_with("msg_"));
    assert_eq!(
        reply.in_response_to.as_ref().unwrap().as_str(),
        "corr_0190c42f2d5a70008000000000000002"
    );
    assert_eq!(reply.session_id, req.session_id);
    assert!(reply.violations().is_empty());
    let decoded = decode_envelope(&reply.to_json_vec(), &Limits::default()).unwrap();
    assert_eq!(decoded, reply);
}

#[test]
fn the_registry_has_58_types_with_distinct_strings_and_body_keys() {
    assert_eq!(MessageType::ALL.len(), 58);
    let mut s = std::collections::HashSet::new();
    let mut k = std::collections::HashSet::new();
    for t in MessageType::ALL {
        assert!(s.insert(t.as_str()));
        assert!(k.insert(t.body_key()));
        assert_eq!(MessageType::from_wire(t.as_str()), Some(*t));
        assert_eq!(MessageType::from_body_key(t.body_key()), Some(*t));
    }
    assert_eq!(
        MessageType::from_wire("aip.economic.v1.batch_settlement")
            .unwrap()
            .body_key(),
        "batch_settlement"
    );
    assert_eq!(
        MessageType::Manifest.as_str(),
        "aip.discovery.v1.manifest_response"
    );
    assert_eq!(
        MessageType::Conversation.as_str(),
        "aip.channel.v1.conversation_updated"
    );
}
