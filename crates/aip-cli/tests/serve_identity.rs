//! The node's identity through the binary (spec 14.2, 22.2): a persistent Ed25519 did:key,
//! created into the data directory on first start (mode 0600) or configured from a key file that
//! `aip keys generate` wrote, published as the manifest agent's `did`; an exposed key stops startup.
#![allow(clippy::unwrap_used)]

mod support;

use std::os::unix::fs::PermissionsExt;

use serde_json::Value;
use support::Server;

fn did_of(key_file: &std::path::Path) -> String {
    let file: Value = serde_json::from_str(&std::fs::read_to_string(key_file).unwrap()).unwrap();
    file["did"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_node_publishes_the_did_of_its_persistent_key_in_its_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Server::start(&data, None, &[]);
    let key = data.join("node.key");
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let did = did_of(&key);
    assert!(did.starts_with("did:key:z6Mk"), "{did}");
    let (_, manifest) = server.admin().get("/aip/v1/manifest").await;
    assert_eq!(manifest["agent"]["did"], did.as_str(), "{manifest}");
    // The same identity after a restart.
    server.kill();
    let server = Server::start(&data, None, &[]);
    let (_, manifest) = server.admin().get("/aip/v1/manifest").await;
    assert_eq!(manifest["agent"]["did"], did.as_str());
}

#[tokio::test]
async fn a_configured_node_key_is_used_and_an_exposed_one_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("node-key.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["keys", "generate", "--out"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let config = dir.path().join("aip.toml");
    std::fs::write(&config, format!("node_key_file = \"{}\"\n", key.display())).unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let (_, manifest) = server.admin().get("/aip/v1/manifest").await;
    assert_eq!(manifest["agent"]["did"], did_of(&key).as_str());
    assert!(
        !dir.path().join("data/node.key").exists(),
        "no second key is made"
    );
    drop(server);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data2"))
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("chmod 600"), "{err}");
}
