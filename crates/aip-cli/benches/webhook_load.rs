//! Load benchmark of the webhook ingress (spec 21.3): signed deliveries to
//! `/aip/v1/webhooks/{id}` (HMAC verify over the raw body, the delivery id's durable claim, the
//! async admission of `cap:demo:echo`) against native async actions of the same capability over
//! HTTP (admission only, answered 202), on one `aip serve` node with its embedded SQLite store, in
//! the same run.
//!
//! Run with `cargo bench -p aip-cli --bench webhook_load`; `AIP_BENCH_REQUESTS` overrides the
//! operations per level (default 3000), `AIP_BENCH_LEVELS` the concurrency levels (default 1,16).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use aip_server::profile::webhook::{Secret, SigningOrder};
use serde_json::json;

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

async fn deliver(http: &reqwest::Client, url: &str, secret: &Secret, i: usize) {
    let id = common::fresh("msg_");
    let body = json!({ "type": "order.created", "data": { "i": i } }).to_string();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let signature = secret.sign(SigningOrder::IdTimestampBody, &id, &now, body.as_bytes());
    let r = http
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", now)
        .header("webhook-signature", signature)
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
}

async fn native_async(http: &reqwest::Client, url: &str, token: &str, i: usize) {
    let mut envelope = common::action(i);
    envelope["body"]["action"]["mode"] = json!("async");
    let r = http
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/aip+json")
        .body(envelope.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
}

fn main() {
    if !common::benchmarking("webhook_load") {
        return;
    }
    let requests = common::requests(3000);
    let levels = common::levels("1,16");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("aip-bench-webhook-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        "[[webhooks]]\nid = \"orders\"\nsecrets = [\"{SECRET}\"]\nevents = {{ \"order.created\" = \"cap:demo:echo\" }}\n"
    );
    let node = common::start_node(&dir, Some(&config), None);
    let http = common::http_client();
    let base = format!("http://{}", node.addr);
    let secret = Secret::parse(SECRET).unwrap();
    let native = {
        let (http, url, token) = (
            http.clone(),
            format!("{base}/aip/v1/actions"),
            node.token.clone(),
        );
        move |i| {
            let (http, url, token) = (http.clone(), url.clone(), token.clone());
            async move { native_async(&http, &url, &token, i).await }
        }
    };
    let webhook = {
        let (http, url) = (http.clone(), format!("{base}/aip/v1/webhooks/orders"));
        move |i| {
            let (http, url, secret) = (http.clone(), url.clone(), secret.clone());
            async move { deliver(&http, &url, &secret, i).await }
        }
    };
    common::compare(
        &rt,
        (requests, levels),
        ("native async admission", "webhook delivery"),
        native,
        webhook,
    );
    drop(node);
    let _ = std::fs::remove_dir_all(&dir);
}
