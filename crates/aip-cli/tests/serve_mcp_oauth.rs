//! The MCP endpoint's OAuth resource-server mode (spec 21.1, notes section 5 item 7): JWT access
//! tokens verified offline against the configured issuer, audience and JWKS file; a wrong issuer,
//! another resource's audience, an expired or not-yet-valid token, a missing subject, an unknown key
//! or static token each get 401 naming the resource metadata, a missing scope 403, and nothing is
//! dispatched; a valid token's action is recorded as the mapped principal's.
#![allow(clippy::unwrap_used)]

mod support;

use base64::Engine;
use ed25519_dalek::SigningKey;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use support::mcp::Mcp;
use support::{Server, token_file};

const ISSUER: &str = "https://auth.example.test";

/// An Ed25519 key: its PKCS#8 v1 DER for signing and its JWK for the server's key set.
fn key(seed: u8, kid: &str) -> (EncodingKey, Value) {
    let seed = [seed; 32];
    let public = SigningKey::from_bytes(&seed).verifying_key();
    let mut der = vec![
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    der.extend_from_slice(&seed);
    let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(public.as_bytes());
    let jwk =
        json!({ "kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig" });
    (EncodingKey::from_ed_der(&der), jwk)
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn mint(key: &EncodingKey, kid: &str, claims: Value) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.into());
    jsonwebtoken::encode(&header, &claims, key).unwrap()
}

#[tokio::test]
async fn oauth_tokens_bind_issuer_audience_time_subject_and_scope_to_a_trusted_principal() {
    let dir = tempfile::tempdir().unwrap();
    let (signing, jwk) = key(7, "k1");
    let (stranger, _) = key(9, "k1");
    std::fs::write(
        dir.path().join("jwks.json"),
        json!({ "keys": [jwk] }).to_string(),
    )
    .unwrap();
    let alice_token = token_file(dir.path(), "alice.token", "alice-static-token-0123456789");
    let config = dir.path().join("aip.toml");
    // The server must know its public MCP URL before it starts: take a free port first.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    std::fs::write(
        &config,
        format!(
            r#"
[[principals]]
id = "alice"
kind = "human"
tenant = "default"
scopes = ["invoke:cap:demo:*"]
token_file = "{alice}"

[mcp.oauth]
issuer = "{ISSUER}"
audience = "{resource}"
jwks_file = "{jwks}"
required_scopes = ["mcp"]

[[mcp.oauth.subjects]]
sub = "user-alice"
principal = "alice"
"#,
            alice = alice_token.display(),
            jwks = dir.path().join("jwks.json").display(),
        ),
    )
    .unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_aip"))
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let server = Server::from_child(child, &dir.path().join("data"));
    let good = json!({ "iss": ISSUER, "aud": resource, "sub": "user-alice", "exp": now() + 300, "scope": "mcp other" });

    // RFC 9728 metadata names the resource and its authorization server.
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let metadata: Value = http
            .get(format!("http://{}{path}", server.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(metadata["resource"], resource.as_str());
        assert_eq!(metadata["authorization_servers"], json!([ISSUER]));
        assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    }

    // Each refusal: 401 with the metadata URL, and no session opened.
    let refused = |claims: Value| mint(&signing, "k1", claims);
    let cases = [
        ("no token", None),
        ("unknown static token", Some("not-a-token".to_owned())),
        (
            "wrong issuer",
            Some(refused(
                json!({ "iss": "https://evil.test", "aud": resource, "sub": "user-alice", "exp": now() + 300, "scope": "mcp" }),
            )),
        ),
        (
            "another resource",
            Some(refused(
                json!({ "iss": ISSUER, "aud": "https://other.test/mcp", "sub": "user-alice", "exp": now() + 300, "scope": "mcp" }),
            )),
        ),
        (
            "expired",
            Some(refused(
                json!({ "iss": ISSUER, "aud": resource, "sub": "user-alice", "exp": now() - 120, "scope": "mcp" }),
            )),
        ),
        (
            "not yet valid",
            Some(refused(
                json!({ "iss": ISSUER, "aud": resource, "sub": "user-alice", "exp": now() + 600, "nbf": now() + 300, "scope": "mcp" }),
            )),
        ),
        (
            "no subject",
            Some(refused(
                json!({ "iss": ISSUER, "aud": resource, "exp": now() + 300, "scope": "mcp" }),
            )),
        ),
        ("an unknown key", Some(mint(&stranger, "k1", good.clone()))),
    ];
    for (why, token) in cases {
        let mut mcp = Mcp::new(&server.base, token.as_deref());
        let a = mcp
            .call("initialize", json!({"protocolVersion": "2025-11-25"}))
            .await;
        assert_eq!(a.status, 401, "{why}: {}", a.body);
        let challenge = a.headers["www-authenticate"].to_str().unwrap();
        assert!(
            challenge.contains(&format!("resource_metadata=\"http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp\"")),
            "{why}: {challenge}"
        );
        assert!(!a.headers.contains_key("mcp-session-id"), "{why}");
    }
    // A missing required scope: 403 insufficient_scope.
    let narrow = mint(
        &signing,
        "k1",
        json!({ "iss": ISSUER, "aud": resource, "sub": "user-alice", "exp": now() + 300, "scope": "other" }),
    );
    let mut mcp = Mcp::new(&server.base, Some(&narrow));
    let a = mcp
        .call("initialize", json!({"protocolVersion": "2025-11-25"}))
        .await;
    assert_eq!(a.status, 403, "{}", a.body);
    assert!(
        a.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("error=\"insufficient_scope\"")
    );

    // A valid token acts as the mapped principal: the action is alice's.
    let token = mint(&signing, "k1", good);
    let mut mcp = Mcp::new(&server.base, Some(&token));
    mcp.open("2025-11-25").await;
    let result = mcp.tool("demo_echo", json!({"via": "oauth"})).await;
    let action_id = result["_meta"]["dev.aip/aip"]["action_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, _) = server
        .client("alice-static-token-0123456789")
        .get(&format!("/aip/v1/actions/{action_id}"))
        .await;
    assert_eq!(status, 200, "the action must be alice's");
    // The native API does not take OAuth tokens (the mode is the MCP endpoint's).
    assert_eq!(server.client(&token).get("/aip/v1/actions").await.0, 401);
    // The static token still works on /mcp.
    let mut alice = Mcp::new(&server.base, Some("alice-static-token-0123456789"));
    alice.open("2025-06-18").await;
}
