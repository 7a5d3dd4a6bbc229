//! Streaming actions over SSE against the real `aip serve` binary (spec 11.6, 20.2): ordered
//! persisted chunks, Last-Event-ID resume (also after a restart), cursor scoping, cancellation,
//! slow consumers.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{Client, Server, SseEvent, SseReader, envelope, id};

async fn submit_streaming(client: &Client, action_id: &str, input: Value) -> SseReader {
    let body = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": action_id, "capability_id": "cap:demo:count", "mode": "streaming", "input": input } }),
    );
    let response = client
        .http
        .post(format!("http://{}/aip/v1/actions", client.base))
        .bearer_auth(client.token.clone().unwrap())
        .header("content-type", "application/aip+json")
        .header("accept", "text/event-stream")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    SseReader::new(response)
}

async fn follow(client: &Client, action_id: &str, last_event_id: Option<&str>) -> SseReader {
    let mut request = client
        .http
        .get(format!(
            "http://{}/aip/v1/actions/{action_id}/events",
            client.base
        ))
        .bearer_auth(client.token.clone().unwrap())
        .header("accept", "text/event-stream");
    if let Some(last) = last_event_id {
        request = request.header("last-event-id", last);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    SseReader::new(response)
}

fn sequences(events: &[SseEvent]) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e.name == "chunk" || e.name == "done")
        .map(|e| e.data["body"]["stream_chunk"]["sequence"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn a_thousand_chunk_stream_arrives_in_order_with_ids_then_done_and_the_result() {
    thousand_chunk_stream(json!({ "n": 1000 })).await;
}

#[tokio::test]
async fn a_thousand_chunk_stream_persisted_in_bursts_arrives_exactly_like_one_persisted_per_chunk()
{
    // 64 chunks per durable write: 1101 chunks in 18 writes, the last one carrying `done`.
    thousand_chunk_stream(json!({ "n": 1000, "batch": 64 })).await;
}

async fn thousand_chunk_stream(input: Value) {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let admin = server.admin();
    let action_id = id("act_");
    let mut reader = submit_streaming(&admin, &action_id, input).await;
    let events = reader.rest().await;
    assert_eq!(events[0].name, "ack");
    assert!(!events[0].id.is_empty());
    let seqs = sequences(&events);
    // 1000 data chunks, a progress chunk every tenth, then done.
    assert_eq!(seqs, (1..=1101).collect::<Vec<u64>>());
    let data: Vec<u64> = events
        .iter()
        .filter(|e| e.data["body"]["stream_chunk"]["kind"] == "data")
        .map(|e| {
            e.data["body"]["stream_chunk"]["data"]["i"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(data, (1..=1000).collect::<Vec<u64>>());
    // Ids are opaque cursors: distinct, never the action id or a sequence in clear.
    let ids: std::collections::BTreeSet<&str> = events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), events.len());
    assert!(events.iter().all(|e| !e.id.contains(action_id.as_str())));
    let done = &events[events.len() - 2];
    assert_eq!(done.name, "done");
    let last = events.last().unwrap();
    assert_eq!(last.name, "result");
    assert_eq!(last.data["body"]["action_result"]["status"], "completed");
    assert_eq!(last.data["body"]["action_result"]["output"]["count"], 1000);
    // The chunks are durable: the read model serves them too.
    let view = admin.wait_terminal(&action_id).await;
    assert_eq!(view["state"], "completed");
}

#[tokio::test]
async fn a_client_that_disconnects_resumes_with_last_event_id_and_gets_exactly_the_missing_chunks()
{
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let admin = server.admin();
    let action_id = id("act_");
    let mut reader =
        submit_streaming(&admin, &action_id, json!({ "n": 150, "interval_ms": 5 })).await;
    let mut seen = Vec::new();
    while let Some(event) = reader.next().await {
        seen.push(event.clone());
        if event.data["body"]["stream_chunk"]["sequence"] == 40 {
            break;
        }
    }
    drop(reader);
    let last_id = seen.last().unwrap().id.clone();
    let mut resumed = follow(&admin, &action_id, Some(&last_id)).await;
    let rest = resumed.rest().await;
    let mut all = sequences(&seen);
    all.extend(sequences(&rest));
    // No gap, no duplicate: 150 data + 15 progress + done.
    assert_eq!(all, (1..=166).collect::<Vec<u64>>());
    assert_eq!(rest.last().unwrap().name, "result");
    // Followed from the start by another connection: the whole stream again.
    let everything = follow(&admin, &action_id, None).await.rest().await;
    assert_eq!(sequences(&everything), (1..=166).collect::<Vec<u64>>());
}

#[tokio::test]
async fn a_stream_resumes_from_the_store_after_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start(&data, None, &[]);
    let action_id = id("act_");
    let events = submit_streaming(&server.admin(), &action_id, json!({ "n": 30 }))
        .await
        .rest()
        .await;
    assert_eq!(events.last().unwrap().name, "result");
    let at_12 = events
        .iter()
        .find(|e| e.data["body"]["stream_chunk"]["sequence"] == 12)
        .unwrap()
        .id
        .clone();
    let end = events.last().unwrap().id.clone();
    server.kill();
    let server = Server::start(&data, None, &[]);
    let rest = follow(&server.admin(), &action_id, Some(&at_12))
        .await
        .rest()
        .await;
    assert_eq!(sequences(&rest), (13..=34).collect::<Vec<u64>>());
    assert_eq!(rest.last().unwrap().name, "result");
    // After the result, a reconnect gets only the terminal result again.
    let again = follow(&server.admin(), &action_id, Some(&end))
        .await
        .rest()
        .await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].name, "result");
}

#[tokio::test]
async fn a_foreign_or_malformed_cursor_is_a_terminal_typed_error_event() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let admin = server.admin();
    let action_id = id("act_");
    submit_streaming(&admin, &action_id, json!({ "n": 3 }))
        .await
        .rest()
        .await;
    let other_id = id("act_");
    let other = submit_streaming(&admin, &other_id, json!({ "n": 3 }))
        .await
        .rest()
        .await;
    // Another action's cursor, a forged one, the old clear-text form, garbage.
    let foreign = other[1].id.clone();
    let mut forged = foreign.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == 'A' { 'B' } else { 'A' });
    let clear = format!("{action_id}:2");
    for cursor in [foreign.as_str(), &forged, &clear, "garbage"] {
        let events = follow(&admin, &action_id, Some(cursor)).await.rest().await;
        assert_eq!(events.len(), 1, "{cursor}");
        assert_eq!(events[0].name, "error");
        assert_eq!(
            events[0].data["body"]["error"]["error"]["code"],
            "aip.read.invalid_cursor"
        );
    }
    let events = server_events_with_cursor(&admin, "not-a-cursor").await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].name, "error");
    assert_eq!(
        events[0].data["body"]["error"]["error"]["code"],
        "aip.read.invalid_cursor"
    );
}

async fn server_events_with_cursor(client: &Client, cursor: &str) -> Vec<SseEvent> {
    let response = client
        .http
        .get(format!("http://{}/aip/v1/events", client.base))
        .bearer_auth(client.token.clone().unwrap())
        .header("accept", "text/event-stream")
        .header("last-event-id", cursor)
        .send()
        .await
        .unwrap();
    SseReader::new(response).rest().await
}

#[tokio::test]
async fn the_global_event_stream_carries_every_event_with_a_resumable_id_and_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        None,
        &[("AIP_LIMITS__STREAM_HEARTBEAT_MS", "300")],
    );
    let admin = server.admin();
    let action_id = id("act_");
    submit_streaming(&admin, &action_id, json!({ "n": 2 }))
        .await
        .rest()
        .await;
    let response = admin
        .http
        .get(format!("http://{}/aip/v1/events", admin.base))
        .bearer_auth(admin.token.clone().unwrap())
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let mut reader = SseReader::new(response);
    let mut kinds = Vec::new();
    let mut ids = Vec::new();
    loop {
        let event = reader.next().await.unwrap();
        assert!(!event.id.is_empty());
        if event.name == "heartbeat" {
            break;
        }
        assert_eq!(event.name, "message");
        ids.push(event.id.clone());
        kinds.push(
            event.data["body"]["event_stream"]["events"][0]["type"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
    }
    assert!(kinds.len() >= 3, "{kinds:?}");
    // Resuming after the first event replays exactly the others.
    let response = admin
        .http
        .get(format!("http://{}/aip/v1/events", admin.base))
        .bearer_auth(admin.token.clone().unwrap())
        .header("accept", "text/event-stream")
        .header("last-event-id", &ids[0])
        .send()
        .await
        .unwrap();
    let mut resumed = SseReader::new(response);
    let mut again = Vec::new();
    loop {
        let event = resumed.next().await.unwrap();
        if event.name == "heartbeat" {
            break;
        }
        again.push(event.id);
    }
    assert_eq!(again, ids[1..].to_vec());
}

#[tokio::test]
async fn cancelling_a_streaming_action_from_another_connection_ends_the_stream_with_error_chunk_and_cancelled_result()
 {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let admin = server.admin();
    let action_id = id("act_");
    let mut reader =
        submit_streaming(&admin, &action_id, json!({ "n": 10000, "interval_ms": 10 })).await;
    let mut events = Vec::new();
    while let Some(event) = reader.next().await {
        let is_fifth = event.data["body"]["stream_chunk"]["sequence"] == 5;
        events.push(event);
        if is_fifth {
            let other = server.admin();
            let (status, _) = other
                .post(&format!("/aip/v1/actions/{action_id}/cancel"), &json!({}))
                .await;
            assert_eq!(status, 202);
        }
    }
    let last = events.last().unwrap();
    assert_eq!(last.name, "result");
    assert_eq!(last.data["body"]["action_result"]["status"], "cancelled");
    let closing = &events[events.len() - 2];
    assert_eq!(closing.data["body"]["stream_chunk"]["kind"], "error");
    assert_eq!(
        closing.data["body"]["stream_chunk"]["data"]["code"],
        "aip.action.cancelled"
    );
    let seqs = sequences(&events);
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<u64>>());
    assert!(seqs.len() < 1000);
}

#[tokio::test]
async fn a_stalled_consumer_is_disconnected_and_the_action_still_completes() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("AIP_LIMITS__STREAM_BUFFER_EVENTS", "4"),
        ("AIP_LIMITS__STREAM_SEND_TIMEOUT_MS", "300"),
    ];
    let server = Server::start(&dir.path().join("data"), None, &env);
    let admin = server.admin();
    let action_id = id("act_");
    // ~13 MB of chunks: far more than the socket buffers and the 4-event connection buffer hold.
    let mut reader = submit_streaming(&admin, &action_id, json!({ "n": 800, "pad": 16000 })).await;
    // Stall: read nothing while the action produces them.
    let view = admin.wait_terminal(&action_id).await;
    assert_eq!(view["state"], "completed");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let events = reader.rest().await;
    assert!(
        events.iter().all(|e| e.name != "result"),
        "a stalled consumer must be cut off, not buffered"
    );
    let metrics = admin
        .http
        .get(format!("http://{}/metrics", admin.base))
        .bearer_auth(admin.token.clone().unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("aip_stream_slow_consumer_total"),
        "{metrics}"
    );
}

#[tokio::test]
async fn chunks_are_paged_with_stream_cursors_and_included_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), None, &[]);
    let admin = server.admin();
    let action_id = id("act_");
    let events = submit_streaming(&admin, &action_id, json!({ "n": 30 }))
        .await
        .rest()
        .await;
    // 30 data + 3 progress + done, in pages of 10.
    let mut cursor: Option<String> = None;
    let mut all = Vec::new();
    loop {
        let path = match &cursor {
            Some(c) => format!("/aip/v1/actions/{action_id}/chunks?limit=10&cursor={c}"),
            None => format!("/aip/v1/actions/{action_id}/chunks?limit=10"),
        };
        let (status, page) = admin.get(&path).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["terminal"], true);
        let chunks = page["chunks"].as_array().unwrap().clone();
        assert!(chunks.len() <= 10);
        if chunks.is_empty() {
            break;
        }
        all.extend(chunks.iter().map(|c| c["sequence"].as_u64().unwrap()));
        cursor = Some(page["cursor"].as_str().unwrap().to_owned());
    }
    assert_eq!(all, (1..=34).collect::<Vec<u64>>());
    // An SSE id is a chunk cursor too.
    let at_12 = events
        .iter()
        .find(|e| e.data["body"]["stream_chunk"]["sequence"] == 12)
        .unwrap()
        .id
        .clone();
    let (status, page) = admin
        .get(&format!(
            "/aip/v1/actions/{action_id}/chunks?limit=5&cursor={at_12}"
        ))
        .await;
    assert_eq!(status, 200);
    assert_eq!(page["chunks"][0]["sequence"], 13);
    // Another action's cursor and a bad limit are refused.
    let other = id("act_");
    let other_events = submit_streaming(&admin, &other, json!({ "n": 1 }))
        .await
        .rest()
        .await;
    let (status, body) = admin
        .get(&format!(
            "/aip/v1/actions/{action_id}/chunks?cursor={}",
            other_events[1].id
        ))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "aip.read.invalid_cursor");
    let (status, _) = admin
        .get(&format!("/aip/v1/actions/{action_id}/chunks?limit=0"))
        .await;
    assert_eq!(status, 400);
    // Nobody else's: an unknown action is not found.
    let (status, _) = admin.get("/aip/v1/actions/act_nobody/chunks").await;
    assert_eq!(status, 404);
    // include_chunks on the status and on the first page of events.
    let (status, view) = admin
        .get(&format!("/aip/v1/actions/{action_id}?include_chunks=true"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(view["chunks"].as_array().unwrap().len(), 34);
    let (status, page) = admin
        .get(&format!(
            "/aip/v1/actions/{action_id}/events?include_chunks=true&limit=7"
        ))
        .await;
    assert_eq!(status, 200);
    assert_eq!(page["chunks"].as_array().unwrap().len(), 7);
    assert_eq!(page["chunks"][0]["sequence"], 1);
}
