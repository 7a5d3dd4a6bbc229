//! Stream cursors on several `aip serve` nodes sharing one PostgreSQL database (spec 16.2, 20.2):
//! an SSE stream read on one node resumes on another from its opaque `Last-Event-ID`, with no gap
//! and no duplicate. Needs `AIP_TEST_POSTGRES_URL` (SKIP notice otherwise; a failure under
//! `CI=true`).
#![allow(clippy::unwrap_used)]

mod cluster;
mod support;

use cluster::{TestDb, start_node};
use serde_json::{Value, json};
use support::{Client, SseReader, envelope, id};

/// `(event name, id, data)` of every SSE event until the stream ends.
async fn read_all(response: reqwest::Response) -> Vec<(String, String, Value)> {
    let events = SseReader::new(response).rest().await;
    events.into_iter().map(|e| (e.name, e.id, e.data)).collect()
}

fn sequences(events: &[(String, String, Value)]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|(_, _, data)| data["body"]["stream_chunk"]["sequence"].as_u64())
        .collect()
}

async fn sse(client: &Client, request: reqwest::RequestBuilder) -> reqwest::Response {
    let response = request
        .bearer_auth(client.token.clone().unwrap())
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response
}

#[tokio::test]
async fn a_stream_read_on_one_node_resumes_on_another_from_its_last_event_id() {
    let Some(db) = TestDb::create("stream cursors across nodes").await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let a = start_node(&dir.path().join("a"), &db.url, &[], None);
    let b = start_node(&dir.path().join("b"), &db.url, &[], None);
    let (on_a, on_b) = (a.admin(), b.admin());
    let action_id = id("act_");
    let body = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": action_id, "capability_id": "cap:demo:count", "mode": "streaming", "input": { "n": 40 } } }),
    );
    let first = read_all(
        sse(
            &on_a,
            on_a.http
                .post(format!("http://{}/aip/v1/actions", on_a.base))
                .header("content-type", "application/aip+json")
                .body(body.to_string()),
        )
        .await,
    )
    .await;
    assert_eq!(sequences(&first), (1..=45).collect::<Vec<u64>>());
    let at_20 = first
        .iter()
        .find(|(_, _, d)| d["body"]["stream_chunk"]["sequence"] == 20)
        .unwrap()
        .1
        .clone();
    let rest = read_all(
        sse(
            &on_b,
            on_b.http
                .get(format!(
                    "http://{}/aip/v1/actions/{action_id}/events",
                    on_b.base
                ))
                .header("last-event-id", &at_20),
        )
        .await,
    )
    .await;
    assert_eq!(sequences(&rest), (21..=45).collect::<Vec<u64>>());
    assert_eq!(rest.last().unwrap().0, "result");
    // The same cursor pages chunks on node B.
    let (status, page) = on_b
        .get(&format!(
            "/aip/v1/actions/{action_id}/chunks?limit=3&cursor={at_20}"
        ))
        .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["chunks"][0]["sequence"], 21);
}
