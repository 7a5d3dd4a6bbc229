//! Authentication refusals are audited at a bounded cost (spec 18.3): a flood of bad credentials
//! becomes a few audit events per window in the node's security log, each carrying the number of
//! refusals it stands for, and a metric counts every refusal.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::Value;
use support::{Server, token_file};

/// Bad bearer tokens sent in the flood (a multiple of the 16 senders).
const FLOOD: u64 = 10_000;

const AUDITOR: &str = "aip_test_auditor_token_0000000000000000";

/// The node log's `auth.refused` events of `reason`: (their number, the refusals they stand for).
async fn refusals(admin: &support::Client, reason: &str) -> (usize, u64) {
    let (status, page) = admin.get("/aip/v1/audit/events?log=node&limit=1000").await;
    assert_eq!(status, 200, "{page}");
    let events: Vec<&Value> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "auth.refused" && e["data"]["reason"] == reason)
        .collect();
    let count = events
        .iter()
        .map(|e| e["data"]["count"].as_u64().unwrap())
        .sum();
    (events.len(), count)
}

#[tokio::test]
async fn a_flood_of_bad_credentials_is_a_few_node_log_events_carrying_its_count_and_a_metric_per_refusal()
 {
    let dir = tempfile::tempdir().unwrap();
    let auditor = token_file(dir.path(), "auditor.token", AUDITOR);
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            "[security]\nrefusal_audit_window_ms = 500\n\n[[principals]]\nid = \"svc:auditor\"\n\
             tenant = \"acme\"\nscopes = [\"audit:read\"]\ntoken_file = \"{}\"\n",
            auditor.display()
        ),
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let admin = server.admin();
    // The first refusal of a window is audited at once, in the background: the refused request
    // does not wait for the store.
    let forged = server.client("aip_not_a_token");
    assert_eq!(forged.get("/aip/v1/actions").await.0, 401);
    let mut first = refusals(&admin, "bad_bearer_token").await;
    for _ in 0..40 {
        if first != (0, 0) {
            break;
        }
        support::pause(50).await;
        first = refusals(&admin, "bad_bearer_token").await;
    }
    assert_eq!(first, (1, 1));
    // Then a flood of 10,000, 16 at a time.
    let flood_started = std::time::Instant::now();
    let mut flood = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let forged = server.client("aip_not_a_token");
        flood.spawn(async move {
            for _ in 0..FLOOD / 16 {
                assert_eq!(forged.get("/aip/v1/actions").await.0, 401);
            }
        });
    }
    while let Some(done) = flood.join_next().await {
        done.unwrap();
    }
    let flood_took = flood_started.elapsed();
    for _ in 0..5 {
        assert_eq!(server.anonymous().get("/aip/v1/sessions").await.0, 401);
    }
    let evil_host = admin
        .http
        .get(format!("http://{}/aip/v1/manifest", server.base))
        .header("host", "evil.example")
        .bearer_auth(&server.admin_token)
        .send()
        .await
        .unwrap();
    assert!(evil_host.status().is_client_error());
    // Each window's refusals become at most two events (its first, and one for the rest when it
    // ends), each carrying the number it stands for: never one write per refusal.
    let total = FLOOD + 1;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while refusals(&admin, "bad_bearer_token").await.1 < total {
        assert!(
            std::time::Instant::now() < deadline,
            "the window's count was never written"
        );
        support::pause(100).await;
    }
    let (events, count) = refusals(&admin, "bad_bearer_token").await;
    let windows = usize::try_from(flood_took.as_millis() / 500).unwrap() + 2;
    println!(
        "{total} bad bearer tokens in {flood_took:?}: {events} audit events ({windows} windows at most)"
    );
    assert_eq!(count, total);
    assert!(
        events <= 2 * windows,
        "{events} events for {windows} windows"
    );
    // Its window's rest is written when that window ends, like the flood's above.
    while refusals(&admin, "missing_credentials").await.1 < 5 {
        assert!(
            std::time::Instant::now() < deadline,
            "the missing-credentials window's count was never written"
        );
        support::pause(100).await;
    }
    assert_eq!(refusals(&admin, "missing_credentials").await.1, 5);
    assert_eq!(refusals(&admin, "host_not_allowed").await, (1, 1));
    let (_, page) = admin.get("/aip/v1/audit/events?log=node&limit=1000").await;
    let first = &page["events"][0];
    assert_eq!(first["data"]["source"], "127.0.0.1", "{first}");
    assert_eq!(first["data"]["window_ms"], 500, "{first}");
    assert_eq!(first["actor"]["kind"], "system", "{first}");
    // The tenant's own audit does not hold them, and only the admin tenant reads the node log.
    let (_, own) = admin.get("/aip/v1/audit/events?limit=1000").await;
    assert!(
        !own["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "auth.refused"),
        "{own}"
    );
    let (status, _) = server
        .client(AUDITOR)
        .get("/aip/v1/audit/events?log=node")
        .await;
    assert_eq!(status, 404);
    let (status, reply) = admin.get("/aip/v1/audit/events?log=tenant").await;
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (400, Some("aip.read.invalid_query"))
    );
    // Every refusal is counted in the metric.
    let metrics = admin.get_text("/metrics").await;
    assert!(
        metrics.contains("aip_auth_refusals_total{reason=\"bad_bearer_token\"} 10001"),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_node_log_tenant_is_reserved_and_the_window_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let auditor = token_file(dir.path(), "auditor.token", AUDITOR);
    for (name, body) in [
        (
            "reserved",
            format!(
                "[[principals]]\nid = \"svc:x\"\ntenant = \"aip.node\"\nscopes = []\ntoken_file = \"{}\"\n",
                auditor.display()
            ),
        ),
        (
            "window",
            "[security]\nrefusal_audit_window_ms = 0\n".to_owned(),
        ),
    ] {
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(&config, body).unwrap();
        let err = support::serve_refused(&dir.path().join(name), &config);
        let key = if name == "reserved" {
            "aip.node"
        } else {
            "security.refusal_audit_window_ms"
        };
        assert!(err.contains(key), "{err}");
    }
}
