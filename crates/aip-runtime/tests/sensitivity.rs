//! Sensitive outputs (spec 9.6, 16.3): `restricted`, `regulated` and `unknown` data of another
//! principal's action is withheld from a reader without `data:sensitive`; the owner reads its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use support::{caller, envelope, id};

async fn status(h: &support::Harness, reader: &aip_runtime::Caller, action_id: &str) -> Value {
    let (code, reply) = h
        .send(
            reader,
            &envelope(
                "aip.lifecycle.v1.action_status_request",
                json!({ "action_status_request": { "action_id": action_id, "include_result": true } }),
            ),
        )
        .await;
    assert_eq!(code, 200, "{reply}");
    reply["body"]["action_status"].clone()
}

async fn result(h: &support::Harness, reader: &aip_runtime::Caller, action_id: &str) -> Value {
    let (code, reply) = h
        .send(
            reader,
            &envelope(
                "aip.lifecycle.v1.action_result_request",
                json!({ "action_result_request": { "action_id": action_id } }),
            ),
        )
        .await;
    assert_eq!(code, 200, "{reply}");
    reply["body"]["action_result"].clone()
}

/// Runs `cap:t:data:<sensitivity>` as `owner` on `{ "secret": 42 }`; its action id.
async fn secret_echo(
    h: &support::Harness,
    owner: &aip_runtime::Caller,
    sensitivity: &str,
) -> String {
    let action_id = id("act_");
    let (code, reply) = h
        .act(
            owner,
            None,
            json!({ "id": action_id, "capability_id": format!("cap:t:data:{sensitivity}"), "mode": "sync", "input": { "secret": 42 } }),
        )
        .await;
    assert_eq!(code, 200, "{reply}");
    action_id
}

#[tokio::test]
async fn restricted_regulated_and_unknown_outputs_are_withheld_from_other_readers_without_data_sensitive()
 {
    let h = support::Harness::start().await;
    let owner = caller("alice", "t", &["invoke:*"]);
    let tenant_reader = caller("ops", "t", &["read:tenant"]);
    let cleared = caller("dpo", "t", &["read:tenant", "data:sensitive"]);
    for (sensitivity, withheld) in [
        ("confidential", false),
        ("restricted", true),
        ("regulated", true),
        ("unknown", true),
    ] {
        let action_id = secret_echo(&h, &owner, sensitivity).await;
        for reader in [&owner, &cleared] {
            let view = status(&h, reader, &action_id).await;
            assert_eq!(view["result"]["output"], json!({ "secret": 42 }), "{view}");
            assert!(view["links"].get("result_withheld").is_none(), "{view}");
            assert_eq!(result(&h, reader, &action_id).await["output"]["secret"], 42);
        }
        let view = status(&h, &tenant_reader, &action_id).await;
        let read = result(&h, &tenant_reader, &action_id).await;
        let list = {
            let (code, reply) = h
                .send(
                    &tenant_reader,
                    &envelope(
                        "aip.lifecycle.v1.action_list_request",
                        json!({ "action_list_request": { "include_results": true, "limit": 1000 } }),
                    ),
                )
                .await;
            assert_eq!(code, 200, "{reply}");
            reply["body"]["action_list"]["actions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["action_id"] == action_id.as_str())
                .cloned()
                .unwrap()
        };
        assert_eq!(view["state"], "completed");
        assert_eq!(read["status"], "completed");
        if withheld {
            for shown in [&view["result"], &read, &list["result"]] {
                assert!(shown.get("output").is_none(), "{sensitivity}: {shown}");
            }
            assert_eq!(view["links"]["result_withheld"], sensitivity, "{view}");
            assert_eq!(list["links"]["result_withheld"], sensitivity, "{list}");
        } else {
            assert_eq!(view["result"]["output"]["secret"], 42, "{view}");
            assert_eq!(read["output"]["secret"], 42);
            assert_eq!(list["result"]["output"]["secret"], 42);
        }
    }
}

/// The `output` an event of the action carries, as `reader` reads the action's events and the
/// tenant feed (`None` when absent), with the `output_withheld` marks seen.
async fn event_outputs(
    h: &support::Harness,
    reader: &aip_runtime::Caller,
    action_id: &str,
) -> Vec<(Value, Value)> {
    let mut seen = Vec::new();
    for (kind, body) in [
        (
            "aip.lifecycle.v1.action_events_request",
            json!({ "action_events_request": { "action_id": action_id } }),
        ),
        (
            "aip.discovery.v1.event_stream_request",
            json!({ "event_stream_request": { "limit": 1000 } }),
        ),
    ] {
        let (code, reply) = h.send(reader, &envelope(kind, body)).await;
        assert_eq!(code, 200, "{reply}");
        let events = reply["body"]
            .as_object()
            .and_then(|b| b.values().next())
            .map(|v| v["events"].clone())
            .unwrap();
        let event = events
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == "aip.delegation.reconciled" && e["action_id"] == action_id)
            .cloned()
            .unwrap_or_else(|| panic!("{kind}: no reconciled event in {events}"));
        seen.push((
            event["data"]["output"].clone(),
            event["data"]["output_withheld"].clone(),
        ));
    }
    seen
}

#[tokio::test]
async fn an_output_carried_by_an_event_is_withheld_from_tenant_readers_exactly_as_the_result_is() {
    let h = support::Harness::start().await;
    let owner = caller("alice", "t", &["invoke:*"]);
    let tenant_reader = caller("ops", "t", &["read:tenant"]);
    let cleared = caller("dpo", "t", &["read:tenant", "data:sensitive"]);
    for (sensitivity, withheld) in [("confidential", false), ("restricted", true)] {
        let action_id = secret_echo(&h, &owner, sensitivity).await;
        // What a delegation follow-up records of a child's late outcome (spec 14.5).
        h.runtime
            .store()
            .append_events(vec![aip_store::NewEvent {
                event_id: id("evt_"),
                kind: "aip.delegation.reconciled".into(),
                tenant: "t".into(),
                principal: Some("alice".into()),
                session_id: None,
                action_id: Some(action_id.clone()),
                correlation_id: None,
                occurred_at_ms: 1,
                data: json!({ "outcome": "completed", "output": { "secret": 42 } }),
            }])
            .await
            .unwrap();
        for reader in [&owner, &cleared] {
            for (output, mark) in event_outputs(&h, reader, &action_id).await {
                assert_eq!(output, json!({ "secret": 42 }), "{sensitivity}");
                assert!(mark.is_null(), "{sensitivity}: {mark}");
            }
        }
        for (output, mark) in event_outputs(&h, &tenant_reader, &action_id).await {
            if withheld {
                assert!(output.is_null(), "{sensitivity}: {output}");
                assert_eq!(mark, sensitivity);
            } else {
                assert_eq!(output["secret"], 42, "{sensitivity}");
                assert!(mark.is_null());
            }
        }
    }
}
