//! The Standard Webhooks sender of the ingress tests: `tests/interop/webhook_send.py` signs each
//! case with the `standardwebhooks` 1.1.0 library (installed by `.ci/run`) and posts it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::Server;

/// The interop venv's Python when it holds `standardwebhooks` 1.1.0.
pub fn python() -> Option<PathBuf> {
    super::interop_python("standardwebhooks", "1.1.0")
        .map_err(|why| super::skip_or_fail(&format!("webhook interop test: {why}")))
        .ok()
}

/// Sends `cases` with the library-based sender; one result per case, in order.
pub fn send(python: &Path, cases: &[Value]) -> Vec<Value> {
    let out = super::run_script(
        python,
        "tests/interop/webhook_send.py",
        &[],
        &Value::from(cases.to_vec()),
    );
    let results: Vec<Value> = serde_json::from_value(out).unwrap();
    assert_eq!(results.len(), cases.len());
    results
}

pub fn case(
    server: &Server,
    name: &str,
    subscription: &str,
    secret: &str,
    id: &str,
    body: &Value,
) -> Value {
    json!({
        "name": name,
        "url": format!("http://{}/aip/v1/webhooks/{subscription}", server.base),
        "secret": secret,
        "id": id,
        "body": body.to_string(),
    })
}

pub fn with(mut case: Value, key: &str, value: Value) -> Value {
    case[key] = value;
    case
}
