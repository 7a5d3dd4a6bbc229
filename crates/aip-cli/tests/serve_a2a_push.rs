//! A2A push notification configs through the binary, driven by the official `a2a-sdk` 1.3.0
//! client (`tests/interop/a2a_probe.py`): create, get, list and delete on a task; the URL checked
//! against the node's callback policy before anything is stored (a link-local metadata address is
//! refused, the loopback receiver only because this node's policy explicitly allows it); every
//! transition delivered by the durable callback outbox as the SDK sender would post it (a
//! `StreamResponse` with the task, `X-A2A-Notification-Token`, `Authorization`); a config given
//! with `SendMessage` as the action's own callback.
#![allow(clippy::unwrap_used)]

#[path = "../../aip-runtime/tests/callback_receiver/mod.rs"]
mod callback_receiver;
mod support;

use std::path::{Path, PathBuf};

use callback_receiver::{Hit, Receiver};
use serde_json::{Value, json};
use support::a2a::{ok, probe, python};
use support::{Server, token_file};

const ALICE: &str = "alice-push-token-0123456789abcdef";
const BOB: &str = "bob-push-token-0123456789abcdef01";

/// The explicit test policy that lets the node reach the loopback receiver.
const LOOPBACK: &[(&str, &str)] = &[
    ("AIP_CALLBACKS__ALLOW_INTERNAL_HOSTS", "[\"127.0.0.1\"]"),
    ("AIP_CALLBACKS__ALLOW_HTTP_HOSTS", "[\"127.0.0.1\"]"),
    ("AIP_CALLBACKS__RETRY_BACKOFF_MS", "[100]"),
];

fn config(dir: &Path) -> PathBuf {
    let alice = token_file(dir, "alice.token", ALICE);
    let bob = token_file(dir, "bob.token", BOB);
    let path = dir.join("aip.toml");
    std::fs::write(
        &path,
        format!(
            "[[principals]]\nid = \"alice\"\ntoken_file = \"{}\"\nscopes = [\"invoke:cap:demo:*\"]\n\n\
             [[principals]]\nid = \"bob\"\ntoken_file = \"{}\"\nscopes = [\"invoke:cap:demo:*\"]\n\n\
             [a2a]\npublic_skills = [\"cap:demo:echo\"]\ndefault_capability = \"cap:demo:echo\"\n",
            alice.display(),
            bob.display()
        ),
    )
    .unwrap();
    path
}

/// The deliveries the receiver got for `task`, as (task JSON, headers).
fn pushes(receiver: &Receiver, task: &str) -> Vec<(Value, Hit)> {
    receiver
        .hits()
        .into_iter()
        .filter_map(|hit| {
            let body: Value = serde_json::from_slice(&hit.body).ok()?;
            (body["task"]["id"] == task).then(|| (body["task"].clone(), hit))
        })
        .collect()
}

/// Waits until the receiver got `task` in `state`; that delivery.
async fn pushed(receiver: &Receiver, task: &str, state: &str) -> (Value, Hit) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Some(found) = pushes(receiver, task)
            .into_iter()
            .find(|(t, _)| t["status"]["state"] == state)
        {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {state} push for {task}: {:?}",
            pushes(receiver, task)
                .iter()
                .map(|(t, _)| t.clone())
                .collect::<Vec<_>>()
        );
        support::pause(100).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_configs_are_policy_checked_owned_and_delivered_with_their_credentials() {
    let Some(python) = python() else { return };
    let receiver = Receiver::start(&[], None).await;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        Some(&config(dir.path())),
        LOOPBACK,
    );
    let (_, card) = server.anonymous().get("/.well-known/agent-card.json").await;
    assert_eq!(card["capabilities"]["pushNotifications"], true, "{card}");

    // A queued task, then its configs.
    let queued = probe(
        &python,
        &server,
        ALICE,
        false,
        &[
            json!({ "op": "send", "capability": "cap:demo:sleep", "data": { "ms": 1500 },
                  "return_immediately": true }),
        ],
    );
    let task = ok(&queued[0])[0]["task"]["id"].as_str().unwrap().to_owned();
    let url = receiver.url();
    let results = probe(
        &python,
        &server,
        ALICE,
        false,
        &[
            json!({ "op": "push_create", "id": task, "url": url, "config_id": "cfg-1",
                    "token": "tok-1", "scheme": "Bearer", "credentials": "receiver-secret" }),
            json!({ "op": "push_get", "id": task, "config_id": "cfg-1" }),
            json!({ "op": "push_list", "id": task }),
            // The cloud metadata address is never reachable, whatever the URL looks like.
            json!({ "op": "push_create", "id": task, "url": "http://169.254.169.254/latest/meta-data",
                    "config_id": "cfg-evil" }),
            json!({ "op": "push_get", "id": task, "config_id": "cfg-evil" }),
            json!({ "op": "push_create", "id": "act_missing", "url": url }),
        ],
    );
    let created = ok(&results[0]);
    assert_eq!(
        (
            created["id"].as_str(),
            created["taskId"].as_str(),
            created["url"].as_str()
        ),
        (Some("cfg-1"), Some(task.as_str()), Some(url.as_str())),
        "{created}"
    );
    assert_eq!(ok(&results[1])["token"], "tok-1", "{}", results[1]);
    assert_eq!(
        ok(&results[2])["configs"].as_array().unwrap().len(),
        1,
        "{}",
        results[2]
    );
    assert_eq!(results[3]["error"], "InvalidParamsError", "{}", results[3]);
    assert!(
        results[3]
            .to_string()
            .contains("aip.callback.target_denied"),
        "{}",
        results[3]
    );
    assert_eq!(results[4]["error"], "TaskNotFoundError", "{}", results[4]);
    assert_eq!(results[5]["error"], "TaskNotFoundError", "{}", results[5]);

    // Bob learns nothing of alice's task or its configs.
    let bob = probe(
        &python,
        &server,
        BOB,
        false,
        &[
            json!({ "op": "push_create", "id": task, "url": url }),
            json!({ "op": "push_get", "id": task, "config_id": "cfg-1" }),
            json!({ "op": "push_list", "id": task }),
            json!({ "op": "push_delete", "id": task, "config_id": "cfg-1" }),
        ],
    );
    for refused in &bob {
        assert_eq!(refused["error"], "TaskNotFoundError", "{refused}");
    }

    // The completion arrives as the SDK sender posts it, with the config's credentials.
    let (done, hit) = pushed(&receiver, &task, "TASK_STATE_COMPLETED").await;
    assert_eq!(done["metadata"]["aip.state"], "completed", "{done}");
    assert_eq!(
        hit.headers
            .get("x-a2a-notification-token")
            .map(String::as_str),
        Some("tok-1")
    );
    assert_eq!(
        hit.headers.get("authorization").map(String::as_str),
        Some("Bearer receiver-secret")
    );
    assert_eq!(
        hit.headers.get("content-type").map(String::as_str),
        Some("application/json")
    );

    // Deleted, it is gone; a second delete finds nothing.
    let deleted = probe(
        &python,
        &server,
        ALICE,
        false,
        &[
            json!({ "op": "push_delete", "id": task, "config_id": "cfg-1" }),
            json!({ "op": "push_list", "id": task }),
            json!({ "op": "push_delete", "id": task, "config_id": "cfg-1" }),
        ],
    );
    ok(&deleted[0]);
    assert!(
        ok(&deleted[1])
            .get("configs")
            .is_none_or(|c| c.as_array().unwrap().is_empty()),
        "{}",
        deleted[1]
    );
    assert_eq!(deleted[2]["error"], "TaskNotFoundError", "{}", deleted[2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_given_with_the_message_follows_the_task_from_its_first_state() {
    let Some(python) = python() else { return };
    let receiver = Receiver::start(&[], None).await;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        &dir.path().join("data"),
        Some(&config(dir.path())),
        LOOPBACK,
    );
    let url = receiver.url();
    let sent = probe(
        &python,
        &server,
        ALICE,
        false,
        &[json!({ "op": "send", "text": "hello", "push": { "url": url, "token": "tok-2" } })],
    );
    let task = ok(&sent[0])[0]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{}", sent[0]))
        .to_owned();
    let (done, hit) = pushed(&receiver, &task, "TASK_STATE_COMPLETED").await;
    assert!(done["artifacts"].is_array(), "{done}");
    assert_eq!(
        hit.headers
            .get("x-a2a-notification-token")
            .map(String::as_str),
        Some("tok-2")
    );
    let results = probe(
        &python,
        &server,
        ALICE,
        false,
        &[
            json!({ "op": "push_list", "id": task }),
            json!({ "op": "push_delete", "id": task, "config_id": task }),
        ],
    );
    let configs = ok(&results[0])["configs"].as_array().unwrap().clone();
    assert_eq!(configs.len(), 1, "{configs:?}");
    assert_eq!(configs[0]["id"], task.as_str());
    assert_eq!(configs[0]["url"], url.as_str());
    assert_eq!(
        results[1]["error"], "UnsupportedOperationError",
        "{}",
        results[1]
    );
}
