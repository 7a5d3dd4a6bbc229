//! Conversations and channel messages through the binary (spec 15): a connector records
//! messages and updates with envelopes, a webhook subscription records them from a provider's
//! signed deliveries (`standardwebhooks` 1.1.0 as the sender); replays, forged signatures,
//! unbounded or malformed parts and foreign tenants store nothing; readers see only the
//! conversations they recorded, are assigned or are the contact of (or all with `channel:read`),
//! over REST and as resources over envelopes; raw payloads are kept redacted and shown only with
//! `channel:raw`; an action may reference a conversation its caller can see.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::webhook::{case, send, with};
use support::{Client, Server, envelope, token_file};

const CONNECTOR: &str = "connector-token-0123456789abcdef";
const AMY: &str = "amy-token-0123456789abcdef-agent";
const SUPERVISOR: &str = "supervisor-token-0123456789abcdef";
const AUDITOR: &str = "auditor-token-0123456789abcdef-raw";
const OUTSIDER: &str = "outsider-token-0123456789abcdef";
const OTHER_TENANT: &str = "other-tenant-token-0123456789abcdef";
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const FORGED: &str = "whsec_ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=";

fn config(dir: &Path) -> PathBuf {
    let mut principals = String::new();
    for (id, token, tenant, scopes) in [
        (
            "svc:connector",
            CONNECTOR,
            "default",
            r#"["channel:write"]"#,
        ),
        ("agent:amy", AMY, "default", r#"["invoke:cap:demo:echo"]"#),
        (
            "svc:supervisor",
            SUPERVISOR,
            "default",
            r#"["channel:read"]"#,
        ),
        (
            "svc:auditor",
            AUDITOR,
            "default",
            r#"["channel:read", "channel:raw", "audit:read"]"#,
        ),
        ("svc:outsider", OUTSIDER, "default", r#"["invoke:*"]"#),
        ("svc:other", OTHER_TENANT, "other", r#"["*"]"#),
    ] {
        let file = token_file(dir, &format!("{}.token", id.replace(':', "_")), token);
        principals.push_str(&format!(
            "[[principals]]\nid = \"{id}\"\ntenant = \"{tenant}\"\nscopes = {scopes}\ntoken_file = \"{}\"\n\n",
            file.display()
        ));
    }
    let path = dir.join("aip.toml");
    std::fs::write(
        &path,
        format!(
            r#"{principals}
[channels]
retain_raw_payload = true
max_inline_bytes = 64

[[webhooks]]
id = "inbox"
secrets = ["{SECRET}"]
input = "data"
events = {{ "message.created" = "aip.channel.v1.message_created", "conversation.updated" = "aip.channel.v1.conversation_updated" }}
"#
        ),
    )
    .unwrap();
    path
}

fn conversation(id: &str, assignee: Option<&str>) -> Value {
    let mut c = json!({
        "id": id,
        "channel": { "kind": "chat", "provider": "example" },
        "status": "open",
        "contact": { "id": "contact:ann", "kind": "contact" },
        "priority": "high",
        "labels": ["billing"],
    });
    if let Some(a) = assignee {
        c["assignee"] = json!({ "id": a, "kind": "agent" });
    }
    c
}

fn message(conversation: Value, delivery: &str, parts: Value) -> Value {
    json!({
        "conversation": conversation,
        "message": { "provider_id": "m-1" },
        "sender": { "id": "contact:ann", "kind": "contact" },
        "parts": parts,
        "delivery": { "id": delivery },
        "raw_payload": { "text": "hi", "auth": { "token": "tok-planted-secret" } },
    })
}

fn created(body: Value) -> Value {
    envelope(
        "aip.channel.v1.message_created",
        json!({ "channel_message": body }),
    )
}

async fn post(client: &Client, envelope: &Value) -> (u16, Value) {
    client.post("/aip/v1/messages", envelope).await
}

fn code(reply: &Value) -> &str {
    reply["body"]["error"]["error"]["code"]
        .as_str()
        .or_else(|| reply["error"]["code"].as_str())
        .unwrap_or("")
}

async fn conversation_ids(client: &Client) -> Vec<String> {
    let (status, page) = client.get("/aip/v1/conversations").await;
    assert_eq!(status, 200, "{page}");
    page["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["conversation"]["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn message_count(server: &Server, conversation: &str) -> usize {
    let (status, page) = server
        .client(AUDITOR)
        .get(&format!("/aip/v1/conversations/{conversation}/messages"))
        .await;
    if status == 404 {
        return 0;
    }
    assert_eq!(status, 200, "{page}");
    page["messages"].as_array().unwrap().len()
}

#[tokio::test]
async fn connectors_record_messages_once_and_readers_see_only_their_conversations() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config(dir.path())), &[]);
    let connector = server.client(CONNECTOR);
    let conv = support::id("conv_");
    let text = json!([{ "type": "text", "text": "my invoice is wrong" },
                      { "type": "image", "data": "aGVsbG8=", "mime_type": "image/png", "alt": "shot" },
                      { "type": "tool_result", "tool_call_id": "call-1", "data": { "ok": true } }]);

    // Recorded: the reply is the conversation as it now is.
    let (status, reply) = post(
        &connector,
        &created(message(
            conversation(&conv, Some("agent:amy")),
            "d-1",
            text.clone(),
        )),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["message_type"], "aip.channel.v1.conversation_updated",
        "{reply}"
    );
    assert_eq!(
        reply["body"]["conversation"]["conversation"]["id"],
        conv.as_str(),
        "{reply}"
    );

    // Each refusal is typed and stores nothing.
    let other_conv = support::id("conv_");
    let refusals = [
        (
            "replayed delivery",
            CONNECTOR,
            message(conversation(&conv, None), "d-1", text.clone()),
            401,
            "aip.security.replay",
        ),
        (
            "no channel:write",
            OUTSIDER,
            message(conversation(&other_conv, None), "d-2", text.clone()),
            403,
            "aip.policy.scope_denied",
        ),
        (
            "no delivery id",
            CONNECTOR,
            {
                let mut m = message(conversation(&other_conv, None), "x", text.clone());
                m.as_object_mut().unwrap().remove("delivery");
                m
            },
            400,
            "aip.action.invalid_input",
        ),
        (
            "inline data not base64",
            CONNECTOR,
            message(
                conversation(&other_conv, None),
                "d-3",
                json!([{ "type": "image", "data": "not base64!", "mime_type": "image/png" }]),
            ),
            400,
            "aip.action.invalid_input",
        ),
        (
            "inline data over the bound",
            CONNECTOR,
            message(
                conversation(&other_conv, None),
                "d-4",
                json!([{ "type": "file", "data": "A".repeat(200), "mime_type": "text/plain", "filename": "a" }]),
            ),
            400,
            "aip.action.invalid_input",
        ),
        (
            "media without content",
            CONNECTOR,
            message(
                conversation(&other_conv, None),
                "d-5",
                json!([{ "type": "audio", "mime_type": "audio/ogg" }]),
            ),
            400,
            "aip.semantic.part_without_content",
        ),
        (
            "unknown part kind",
            CONNECTOR,
            message(
                conversation(&other_conv, None),
                "d-6",
                json!([{ "type": "hologram" }]),
            ),
            400,
            "",
        ),
        (
            "another tenant's identity",
            CONNECTOR,
            {
                let mut m = message(conversation(&other_conv, None), "d-7", text.clone());
                m["identity"] = json!({ "tenant": { "id": "other" } });
                m
            },
            403,
            "aip.policy.scope_denied",
        ),
    ];
    for (name, token, body, want_status, want_code) in refusals {
        let (status, reply) = post(&server.client(token), &created(body)).await;
        assert_eq!(status, want_status, "{name}: {reply}");
        if !want_code.is_empty() {
            assert_eq!(code(&reply), want_code, "{name}: {reply}");
        }
    }
    assert_eq!(message_count(&server, &conv).await, 1);
    assert_eq!(message_count(&server, &other_conv).await, 0);

    // A second message, then an update from the connector.
    let (status, reply) = post(
        &connector,
        &created(message(
            conversation(&conv, Some("agent:amy")),
            "d-8",
            json!([{ "type": "text", "text": "still wrong" }]),
        )),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    let mut resolved = conversation(&conv, Some("agent:amy"));
    resolved["status"] = json!("resolved");
    let (status, reply) = post(
        &connector,
        &envelope(
            "aip.channel.v1.conversation_updated",
            json!({ "conversation": { "conversation": resolved, "changed_fields": ["status"] } }),
        ),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["body"]["conversation"]["conversation"]["status"], "resolved",
        "{reply}"
    );

    // Visibility: the connector, the assignee, tenant-wide readers; nobody else, and never
    // another tenant (not in lists, 404 on read exactly like an unknown id).
    assert_eq!(conversation_ids(&connector).await, vec![conv.clone()]);
    assert_eq!(
        conversation_ids(&server.client(AMY)).await,
        vec![conv.clone()]
    );
    assert_eq!(
        conversation_ids(&server.client(SUPERVISOR)).await,
        vec![conv.clone()]
    );
    assert!(conversation_ids(&server.client(OUTSIDER)).await.is_empty());
    assert!(
        conversation_ids(&server.client(OTHER_TENANT))
            .await
            .is_empty()
    );
    for token in [OUTSIDER, OTHER_TENANT] {
        for path in [
            format!("/aip/v1/conversations/{conv}"),
            format!("/aip/v1/conversations/{conv}/messages"),
            "/aip/v1/conversations/conv_unknown".to_owned(),
        ] {
            let (status, reply) = server.client(token).get(&path).await;
            assert_eq!(
                (status, code(&reply)),
                (404, "aip.core.not_found"),
                "{path}: {reply}"
            );
        }
    }
    let (status, view) = server
        .client(AMY)
        .get(&format!("/aip/v1/conversations/{conv}"))
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        (
            view["message_count"].as_u64(),
            view["conversation"]["status"].as_str()
        ),
        (Some(2), Some("resolved")),
        "{view}"
    );
    let (status, resolved_list) = server
        .client(SUPERVISOR)
        .get("/aip/v1/conversations?status=open")
        .await;
    assert_eq!(status, 200);
    assert!(
        resolved_list["conversations"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{resolved_list}"
    );

    // Messages: every part kind kept; the raw payload kept redacted, and shown only with channel:raw.
    let (status, page) = server
        .client(AMY)
        .get(&format!("/aip/v1/conversations/{conv}/messages?limit=1"))
        .await;
    assert_eq!(status, 200, "{page}");
    let first = &page["messages"][0];
    assert_eq!(first["parts"], text, "{page}");
    assert!(first.get("raw_payload").is_none(), "{page}");
    let (_, next) = server
        .client(AMY)
        .get(&format!(
            "/aip/v1/conversations/{conv}/messages?cursor={}",
            page["cursor"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        next["messages"][0]["parts"][0]["text"], "still wrong",
        "{next}"
    );
    let (_, raw) = server
        .client(AUDITOR)
        .get(&format!("/aip/v1/conversations/{conv}/messages"))
        .await;
    assert_eq!(
        raw["messages"][0]["raw_payload"],
        json!({ "text": "hi", "auth": { "token": "[redacted]" } }),
        "{raw}"
    );
    assert!(!raw.to_string().contains("tok-planted-secret"), "{raw}");

    // Over envelopes: conversations are resources of their own kind.
    let list = envelope(
        "aip.resource.v1.resource_list_request",
        json!({ "resource_list_request": { "kind": "aip.channel.conversation" } }),
    );
    let (status, reply) = post(&server.client(AMY), &list).await;
    assert_eq!(status, 200, "{reply}");
    let resources = reply["body"]["resource_list"]["resources"]
        .as_array()
        .unwrap();
    assert_eq!(resources.len(), 1, "{reply}");
    assert_eq!(resources[0]["id"], conv.as_str());
    let (_, hidden) = post(&server.client(OUTSIDER), &list).await;
    assert!(
        hidden["body"]["resource_list"]["resources"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{hidden}"
    );
    let read = envelope(
        "aip.resource.v1.resource_read_request",
        json!({ "resource_read_request": { "resource_id": conv } }),
    );
    let (status, reply) = post(&server.client(AMY), &read).await;
    assert_eq!(status, 200, "{reply}");
    let content = &reply["body"]["resource_read_result"]["content"];
    assert_eq!(
        content[0]["data"]["conversation"]["status"], "resolved",
        "{reply}"
    );
    assert_eq!(
        content[1]["data"]["messages"].as_array().unwrap().len(),
        2,
        "{reply}"
    );
    let (status, reply) = post(&server.client(OUTSIDER), &read).await;
    assert_eq!(
        (status, code(&reply)),
        (404, "aip.core.not_found"),
        "{reply}"
    );

    // An action may reference a conversation its caller sees; the read model links it.
    let act = |conversation: Value| {
        json!({ "id": support::id("act_"), "capability_id": "cap:demo:echo",
        "input": { "message": "triage" }, "conversation": conversation })
    };
    let (status, reply) = server.client(AMY).act(act(conversation(&conv, None))).await;
    assert_eq!(status, 200, "{reply}");
    let action_id = reply["body"]["action_result"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, action) = server
        .client(AMY)
        .get(&format!("/aip/v1/actions/{action_id}"))
        .await;
    assert_eq!(action["links"]["conversation"], conv.as_str(), "{action}");
    let (status, reply) = server
        .client(OUTSIDER)
        .act(
            json!({ "id": support::id("act_"), "capability_id": "cap:demo:echo",
        "input": { "message": "peek" }, "conversation": conversation(&conv, None) }),
        )
        .await;
    assert_eq!(
        (status, code(&reply)),
        (404, "aip.core.not_found"),
        "{reply}"
    );

    // Every recording is audited, in the same transaction as the write.
    let (status, audit) = server
        .client(AUDITOR)
        .get("/aip/v1/audit/events?limit=100")
        .await;
    assert_eq!(status, 200, "{audit}");
    let labels: Vec<&str> = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    assert_eq!(
        labels
            .iter()
            .filter(|l| **l == "channel.message_recorded")
            .count(),
        2,
        "{audit}"
    );
    assert_eq!(
        labels
            .iter()
            .filter(|l| **l == "channel.conversation_updated")
            .count(),
        1,
        "{audit}"
    );
}

#[tokio::test]
async fn a_late_delivery_with_an_older_state_is_recorded_without_rolling_the_conversation_back() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config(dir.path())), &[]);
    let connector = server.client(CONNECTOR);
    let conv = support::id("conv_");
    let parts = json!([{ "type": "text", "text": "hello" }]);
    let mut resolved = conversation(&conv, None);
    resolved["status"] = json!("resolved");
    let (status, reply) = post(
        &connector,
        &created(message(resolved, "d-new", parts.clone())),
    )
    .await;
    assert_eq!(status, 200, "{reply}");
    // Sent a minute earlier (within the clock skew), delivered later, with the older status.
    let mut late = created(message(conversation(&conv, None), "d-old", parts));
    let minute_ago = aip_core::Timestamp::now().unix_millis().unwrap() - 60_000;
    late["sent_at"] = json!(aip_core::Timestamp::from_unix_millis(minute_ago).unwrap());
    let (status, reply) = post(&connector, &late).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(
        reply["body"]["conversation"]["conversation"]["status"], "resolved",
        "{reply}"
    );
    let (status, view) = server
        .client(AUDITOR)
        .get(&format!("/aip/v1/conversations/{conv}"))
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["conversation"]["status"], "resolved", "{view}");
    assert_eq!(message_count(&server, &conv).await, 2);
}

#[tokio::test]
async fn webhook_channel_events_are_verified_and_claimed_before_anything_is_stored() {
    let Some(python) = support::webhook::python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config = config(dir.path());
    let mut server = Server::start(&data, Some(&config), &[]);
    let conv = support::id("conv_");
    let event = json!({ "type": "message.created",
        "data": message(conversation(&conv, None), "ignored-delivery", json!([{ "type": "text", "text": "from the provider" }])) });
    let id = support::id("msg_");
    let good = case(&server, "good", "inbox", SECRET, &id, &event);
    let results = send(
        &python,
        &[
            case(
                &server,
                "forged",
                "inbox",
                FORGED,
                &support::id("msg_"),
                &event,
            ),
            with(
                case(
                    &server,
                    "flipped",
                    "inbox",
                    SECRET,
                    &support::id("msg_"),
                    &event,
                ),
                "tamper",
                json!("flip"),
            ),
            good.clone(),
            with(good.clone(), "name", json!("replay")),
            case(
                &server,
                "not a channel message",
                "inbox",
                SECRET,
                &support::id("msg_"),
                &json!({ "type": "message.created", "data": { "text": "loose" } }),
            ),
        ],
    );
    let statuses: Vec<u64> = results
        .iter()
        .map(|r| r["status"].as_u64().unwrap())
        .collect();
    assert_eq!(statuses, [401, 401, 202, 200, 400], "{results:?}");
    assert_eq!(results[2]["body"]["status"], "recorded", "{results:?}");
    assert_eq!(results[3]["body"]["status"], "duplicate", "{results:?}");
    assert_eq!(message_count(&server, &conv).await, 1);
    let (_, page) = server
        .client(AUDITOR)
        .get(&format!("/aip/v1/conversations/{conv}/messages"))
        .await;
    // The verified delivery id is the claim, whatever the body says.
    assert_eq!(
        page["messages"][0]["recorded_by"], "svc:webhook:inbox",
        "{page}"
    );

    // A conversation update: once, and a replay (even after a restart) changes nothing.
    let mut resolved = conversation(&conv, None);
    resolved["status"] = json!("resolved");
    let update = json!({ "type": "conversation.updated", "data": { "conversation": resolved, "changed_fields": ["status"] } });
    let update_id = support::id("msg_");
    let results = send(
        &python,
        &[case(
            &server, "update", "inbox", SECRET, &update_id, &update,
        )],
    );
    assert_eq!(results[0]["status"], 202, "{results:?}");
    server.kill();
    let server = Server::start(&data, Some(&config), &[]);
    let mut reopened = conversation(&conv, None);
    reopened["status"] = json!("open");
    let stale = json!({ "type": "conversation.updated", "data": { "conversation": reopened, "changed_fields": ["status"] } });
    let results = send(
        &python,
        &[
            case(
                &server,
                "replayed update",
                "inbox",
                SECRET,
                &update_id,
                &update,
            ),
            case(&server, "replayed message", "inbox", SECRET, &id, &event),
        ],
    );
    assert_eq!(results[0]["body"]["status"], "duplicate", "{results:?}");
    assert_eq!(results[1]["body"]["status"], "duplicate", "{results:?}");
    // The stale body under the old delivery id is a replay too: it must not roll the state back.
    let results = send(
        &python,
        &[case(
            &server,
            "stale replay",
            "inbox",
            SECRET,
            &update_id,
            &stale,
        )],
    );
    assert_eq!(results[0]["body"]["status"], "duplicate", "{results:?}");
    let (_, view) = server
        .client(SUPERVISOR)
        .get(&format!("/aip/v1/conversations/{conv}"))
        .await;
    assert_eq!(view["conversation"]["status"], "resolved", "{view}");
    assert_eq!(message_count(&server, &conv).await, 1);
}

#[tokio::test]
async fn channel_bounds_out_of_range_stop_startup() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("aip.toml");
    std::fs::write(
        &path,
        format!(
            r#"[[webhooks]]
id = "inbox"
secrets = ["{SECRET}"]
events = {{ "message.created" = "aip.channel.v1.message_created" }}

[channels]
max_parts = 0
"#
        ),
    )
    .unwrap();
    let stderr = support::serve_refused(&dir.path().join("data"), &path);
    assert!(stderr.contains("max_parts"), "{stderr}");
}
