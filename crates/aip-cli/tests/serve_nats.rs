//! The native NATS binding of `aip serve` (spec 20.4), spoken to by an independent plain
//! async-nats client: request/reply with the `TransportMessage` wrapper and bare envelopes, the standard
//! headers, per-message authorization, and two nodes sharing the load in one queue group. Needs
//! `AIP_TEST_NATS_URL` (SKIP notice otherwise; a failure under `CI=true`); every test uses its own
//! trust domain, so its own subjects.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use async_nats::HeaderMap;
use serde_json::{Value, json};
use support::nats::{header, nats_url, node_config, request, start_node};
use support::{Server, envelope, id, skip_or_fail, token_file};

#[tokio::test]
async fn an_action_over_nats_request_reply_returns_its_result_with_the_standard_headers() {
    let Some(url) = nats_url("serve_nats") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let domain = format!("t{}.example", id(""));
    let server = start_node(dir.path(), &url, &domain);
    let client = async_nats::connect(&url).await.unwrap();
    let prefix = format!("aip.v1.{}.aip.v1", domain.replace('.', "_"));
    let action_subject = format!("{prefix}.aip_core_v1_action");

    // Canonical wrapper in, wrapper out.
    let action_id = id("act_");
    let request_envelope = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": action_id, "capability_id": "cap:demo:echo", "mode": "sync", "input": { "over": "nats" } } }),
    );
    let (headers, reply) = request(&client, action_subject.clone(), &request_envelope, true).await;
    let reply = &reply["envelope"];
    assert_eq!(
        reply["message_type"], "aip.core.v1.action_result",
        "{reply}"
    );
    assert_eq!(
        reply["body"]["action_result"]["output"],
        json!({ "over": "nats" })
    );
    assert_eq!(
        reply["in_response_to"], request_envelope["message_id"],
        "{reply}"
    );
    assert_eq!(header(&headers, "AIP-Version"), "1.0");
    assert_eq!(
        header(&headers, "AIP-Message-Type"),
        "aip.core.v1.action_result"
    );
    assert_eq!(
        header(&headers, "AIP-Message-Id"),
        reply["message_id"].as_str().unwrap()
    );
    // The same action is visible over HTTP, owned by the principal bound to the NATS connection.
    let (status, view) = server
        .admin()
        .get(&format!("/aip/v1/actions/{action_id}"))
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["state"], "completed");

    // A bare envelope is accepted and answered bare.
    let bare = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "mode": "sync", "input": { "bare": true } } }),
    );
    let (_, reply) = request(&client, action_subject.clone(), &bare, false).await;
    assert_eq!(
        reply["body"]["action_result"]["output"],
        json!({ "bare": true }),
        "{reply}"
    );

    // Subject access is not capability authorization: book is outside the bound principal's scopes
    // (the runtime does not reveal capabilities a caller may not invoke).
    let book = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:book", "mode": "sync", "idempotency_key": id("k"), "input": { "name": "n", "party_size": 1, "time": "t" } } }),
    );
    let (headers, reply) = request(&client, action_subject.clone(), &book, true).await;
    assert_eq!(header(&headers, "AIP-Message-Type"), "aip.core.v1.error");
    assert_eq!(
        reply["envelope"]["body"]["error"]["error"]["code"], "aip.discovery.capability_not_found",
        "{reply}"
    );

    // The subject names the message type: an action sent on the heartbeat subject is refused.
    let misrouted = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "mode": "sync", "input": {} } }),
    );
    let (_, reply) = request(
        &client,
        format!("{prefix}.aip_core_v1_heartbeat"),
        &misrouted,
        true,
    )
    .await;
    assert_eq!(
        reply["envelope"]["body"]["error"]["error"]["code"], "aip.core.unsupported_message_type",
        "{reply}"
    );

    // Malformed bytes get a typed decode error, not silence.
    let reply = tokio::time::timeout(
        Duration::from_secs(20),
        client.request(action_subject, "{not json".into()),
    )
    .await
    .unwrap()
    .unwrap();
    let reply: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(reply["message_type"], "aip.core.v1.error", "{reply}");
}

#[tokio::test]
async fn two_nodes_in_one_queue_group_share_the_requests() {
    let Some(url) = nats_url("serve_nats") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let domain = format!("t{}", id(""));
    // Separate SQLite stores, so each node's HTTP read model shows exactly the actions it served.
    let a = start_node(&dir.path().join("a"), &url, &domain);
    let b = start_node(&dir.path().join("b"), &url, &domain);
    let client = async_nats::connect(&url).await.unwrap();
    let subject = format!("aip.v1.{domain}.aip.v1.aip_core_v1_action");
    let mut requests = Vec::new();
    for n in 0..40 {
        let client = client.clone();
        let subject = subject.clone();
        requests.push(tokio::spawn(async move {
            let e = envelope(
                "aip.core.v1.action",
                json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "mode": "sync", "input": { "n": n } } }),
            );
            let (_, reply) = request(&client, subject, &e, true).await;
            assert_eq!(
                reply["envelope"]["body"]["action_result"]["output"],
                json!({ "n": n }),
                "{reply}"
            );
        }));
    }
    for r in requests {
        r.await.unwrap();
    }
    let count = |server: &Server| {
        let admin = server.admin();
        async move {
            let (status, list) = admin.get("/aip/v1/actions?limit=1000").await;
            assert_eq!(status, 200, "{list}");
            list["actions"].as_array().unwrap().len()
        }
    };
    let (on_a, on_b) = (count(&a).await, count(&b).await);
    assert_eq!(on_a + on_b, 40, "every request served exactly once");
    assert!(
        on_a > 0 && on_b > 0,
        "one node served everything: {on_a} / {on_b}"
    );
}

fn signed(mut env: Value, key: &ed25519_dalek::SigningKey) -> Value {
    env["security"] = json!({ "did": aip_core::signing::did_key(&key.verifying_key()) });
    env["sent_at"] = serde_json::to_value(aip_core::Timestamp::now()).unwrap();
    aip_core::signing::sign_value(&mut env, key).unwrap();
    env
}

#[tokio::test]
async fn without_a_bound_principal_only_envelopes_signed_by_a_trusted_signer_are_served_once() {
    let Some(url) = nats_url("serve_nats") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let domain = format!("t{}", id(""));
    let key = aip_core::signing::generate_signing_key();
    let did = aip_core::signing::did_key(&key.verifying_key());
    let token = token_file(dir.path(), "svc.token", &id("tok"));
    let config = dir.path().join("aip.toml");
    std::fs::write(
        &config,
        format!(
            "[nats]\nurl = \"{url}\"\ntrust_domain = \"{domain}\"\n\n\
             [[principals]]\nid = \"svc:signer\"\nscopes = [\"invoke:cap:demo:echo\"]\ntoken_file = \"{}\"\n\n\
             [[security.trusted_signers]]\ndid = \"{did}\"\nprincipal = \"svc:signer\"\n",
            token.display()
        ),
    )
    .unwrap();
    let server = Server::start(&dir.path().join("data"), Some(&config), &[]);
    let client = async_nats::connect(&url).await.unwrap();
    let subject = format!("aip.v1.{domain}.aip.v1.aip_core_v1_action");
    let action = || {
        envelope(
            "aip.core.v1.action",
            json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "mode": "sync", "input": { "signed": true } } }),
        )
    };
    let code = |reply: &Value| reply["envelope"]["body"]["error"]["error"]["code"].clone();

    let (_, reply) = request(&client, subject.clone(), &action(), true).await;
    assert_eq!(code(&reply), "aip.security.signature_invalid", "{reply}");

    let good = signed(action(), &key);
    let (_, reply) = request(&client, subject.clone(), &good, true).await;
    assert_eq!(
        reply["envelope"]["body"]["action_result"]["output"],
        json!({ "signed": true }),
        "{reply}"
    );
    let action_id = good["body"]["action"]["id"].as_str().unwrap();
    let (status, view) = server
        .admin()
        .get(&format!("/aip/v1/actions/{action_id}"))
        .await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["state"], "completed");

    let (_, reply) = request(&client, subject.clone(), &good, true).await;
    assert_eq!(code(&reply), "aip.security.replay", "{reply}");

    let stranger = aip_core::signing::generate_signing_key();
    let (_, reply) = request(&client, subject, &signed(action(), &stranger), false).await;
    assert_eq!(
        reply["body"]["error"]["error"]["code"], "aip.security.signature_invalid",
        "{reply}"
    );
}

/// Reads stream messages until the one marked final; returns (sequence header, envelope) pairs.
async fn read_stream(sub: &mut async_nats::Subscriber) -> Vec<(u64, Value)> {
    use futures_util::StreamExt as _;
    let mut items = Vec::new();
    loop {
        let message = tokio::time::timeout(Duration::from_secs(20), sub.next())
            .await
            .expect("the stream stalled")
            .unwrap();
        let headers = message.headers.clone().unwrap_or_default();
        let payload: Value = serde_json::from_slice(&message.payload).unwrap();
        let envelope = payload["envelope"].clone();
        assert_eq!(
            header(&headers, "AIP-Message-Type"),
            envelope["message_type"].as_str().unwrap()
        );
        if envelope["message_type"] == "aip.core.v1.heartbeat" {
            continue;
        }
        let sequence = header(&headers, "AIP-Stream-Sequence").parse().unwrap();
        items.push((sequence, envelope));
        if header(&headers, "AIP-Stream-Final") == "true" {
            return items;
        }
    }
}

#[tokio::test]
async fn a_streaming_action_over_nats_publishes_every_chunk_in_order_then_its_result_on_its_correlation_stream()
 {
    let Some(url) = nats_url("serve_nats") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let domain = format!("t{}", id(""));
    let _server = start_node(dir.path(), &url, &domain);
    let client = async_nats::connect(&url).await.unwrap();
    let prefix = format!("aip.v1.{domain}.aip.v1");
    // A dot in the correlation id becomes an underscore in the subject.
    let correlation = format!("corr.{}", id(""));
    let stream = format!("{prefix}.stream.{}", correlation.replace('.', "_"));
    let mut sub = client.subscribe(stream.clone()).await.unwrap();
    client.flush().await.unwrap();

    let action_id = id("act_");
    let mut submit = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": action_id, "capability_id": "cap:demo:count", "mode": "streaming", "input": { "n": 25, "interval_ms": 2 } } }),
    );
    submit["correlation_id"] = json!(correlation);
    let (headers, reply) = request(
        &client,
        format!("{prefix}.aip_core_v1_action"),
        &submit,
        true,
    )
    .await;
    // The request/reply still answers with the ack.
    assert_eq!(
        header(&headers, "AIP-Message-Type"),
        "aip.core.v1.ack",
        "{reply}"
    );

    let items = read_stream(&mut sub).await;
    let (chunks, result) = items.split_at(items.len() - 1);
    for (n, (sequence, envelope)) in chunks.iter().enumerate() {
        assert_eq!(*sequence, n as u64 + 1, "no gap, no duplicate");
        assert_eq!(envelope["message_type"], "aip.core.v1.stream_chunk");
        assert_eq!(envelope["body"]["stream_chunk"]["sequence"], *sequence);
        assert_eq!(envelope["body"]["stream_chunk"]["action_id"], action_id);
        assert_eq!(envelope["correlation_id"], correlation.as_str());
    }
    let data: Vec<_> = chunks
        .iter()
        .filter(|(_, e)| e["body"]["stream_chunk"]["kind"] == "data")
        .map(|(_, e)| e["body"]["stream_chunk"]["data"]["i"].clone())
        .collect();
    assert_eq!(data, (1..=25).map(|i| json!(i)).collect::<Vec<_>>());
    assert_eq!(
        chunks.last().unwrap().1["body"]["stream_chunk"]["kind"],
        "done"
    );
    let (final_sequence, result) = &result[0];
    assert_eq!(*final_sequence, chunks.len() as u64 + 1);
    assert_eq!(
        result["message_type"], "aip.core.v1.action_result",
        "{result}"
    );
    assert_eq!(result["body"]["action_result"]["status"], "completed");

    // A client that missed messages resumes after chunk 20: any node republishes from 21, then the result.
    let status_request = envelope(
        "aip.lifecycle.v1.action_status_request",
        json!({ "action_status_request": { "action_id": action_id } }),
    );
    let mut resume_headers = HeaderMap::new();
    resume_headers.insert("AIP-Stream-After", "20");
    let payload = json!({ "envelope": status_request }).to_string();
    let status_subject = format!("{prefix}.aip_lifecycle_v1_action_status_request");
    let reply = tokio::time::timeout(
        Duration::from_secs(20),
        client.request_with_headers(status_subject.clone(), resume_headers, payload.into()),
    )
    .await
    .unwrap()
    .unwrap();
    let headers = reply.headers.clone().unwrap_or_default();
    let body: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(
        body["envelope"]["message_type"], "aip.lifecycle.v1.action_status",
        "{body}"
    );
    assert_eq!(header(&headers, "AIP-Stream-Sequence"), "20");
    let resumed = read_stream(&mut sub).await;
    let sequences: Vec<u64> = resumed.iter().map(|(s, _)| *s).collect();
    assert_eq!(sequences, (21..=*final_sequence).collect::<Vec<_>>());
    assert_eq!(
        resumed.last().unwrap().1["message_type"],
        "aip.core.v1.action_result"
    );

    // A resume past the stream's end is refused; a request on a stream subject is not served.
    let mut beyond = HeaderMap::new();
    beyond.insert("AIP-Stream-After", "1000");
    let status_request = envelope(
        "aip.lifecycle.v1.action_status_request",
        json!({ "action_status_request": { "action_id": action_id } }),
    );
    let reply = client
        .request_with_headers(
            status_subject,
            beyond,
            json!({ "envelope": status_request }).to_string().into(),
        )
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(
        body["envelope"]["body"]["error"]["error"]["code"], "aip.read.invalid_cursor",
        "{body}"
    );
    let (_, reply) = request(&client, stream, &status_request, true).await;
    assert_eq!(
        reply["envelope"]["body"]["error"]["error"]["code"], "aip.core.unsupported_message_type",
        "{reply}"
    );
}

const NATS_SERVER: &str = "/usr/sbin/nats-server";

/// A private `nats-server` on a free loopback port with a generated config; killed on drop.
struct PrivateNats {
    child: Child,
    port: u16,
}

impl PrivateNats {
    /// `None` (after a SKIP notice) when the binary is absent; under `CI=true` that fails the
    /// test ([`skip_or_fail`]).
    fn start(dir: &Path, config: &str) -> Option<Self> {
        if !Path::new(NATS_SERVER).exists() {
            skip_or_fail(&format!(
                "{NATS_SERVER} is absent; the NATS connection-option tests need it"
            ));
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let file = dir.join("nats-server.conf");
        std::fs::write(&file, format!("listen: 127.0.0.1:{port}\n{config}\n")).unwrap();
        let child = Command::new(NATS_SERVER)
            .arg("-c")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = Self { child, port };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "nats-server did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(server)
    }
}

impl Drop for PrivateNats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `secret` to a 0600 file.
fn secret_file(dir: &Path, name: &str, secret: &str) -> PathBuf {
    token_file(dir, name, secret)
}

/// `aip serve` with the matching options serves a request from a client holding the same credentials;
/// with `wrong` options it refuses to start, saying why without the secret.
async fn connection_option_case(
    dir: &Path,
    url: &str,
    right: &str,
    client: async_nats::ConnectOptions,
    wrong: &str,
    wrong_secret: &str,
) {
    let domain = format!("t{}", id(""));
    let config = node_config(&dir.join("good"), url, &domain, right);
    let _server = Server::start(&dir.join("good").join("data"), Some(&config), &[]);
    let client = client.connect(url).await.unwrap();
    let e = envelope(
        "aip.core.v1.action",
        json!({ "action": { "id": id("act_"), "capability_id": "cap:demo:echo", "mode": "sync", "input": { "secured": true } } }),
    );
    let (_, reply) = request(
        &client,
        format!("aip.v1.{domain}.aip.v1.aip_core_v1_action"),
        &e,
        true,
    )
    .await;
    assert_eq!(
        reply["envelope"]["body"]["action_result"]["output"],
        json!({ "secured": true }),
        "{reply}"
    );

    // Fail closed: wrong credentials stop startup with a clear error that does not carry the secret.
    let bad = dir.join("bad");
    let config = node_config(&bad, url, &domain, wrong);
    let mut child = Command::new(env!("CARGO_BIN_EXE_aip"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(bad.join("data"))
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("aip serve kept running with wrong NATS credentials");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!status.success(), "{stdout}{stderr}");
    assert!(
        !stdout.contains("listening"),
        "it must not serve HTTP: {stdout}"
    );
    assert!(stderr.contains("nats: cannot connect"), "{stderr}");
    assert!(
        !stderr.contains(wrong_secret),
        "the secret leaked: {stderr}"
    );
    eprintln!("refused as expected: {}", stderr.trim());
}

#[tokio::test]
async fn a_nats_server_requiring_user_and_password_is_served_and_a_wrong_password_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let password = id("pw");
    let Some(nats) = PrivateNats::start(
        dir.path(),
        &format!("authorization {{ user: \"aip\", password: \"{password}\" }}"),
    ) else {
        return;
    };
    let url = format!("nats://127.0.0.1:{}", nats.port);
    let right = secret_file(dir.path(), "pw", &password);
    let wrong_password = id("wrongpw");
    let wrong = secret_file(dir.path(), "wrong-pw", &wrong_password);
    connection_option_case(
        dir.path(),
        &url,
        &format!("user = \"aip\"\npassword_file = \"{}\"", right.display()),
        async_nats::ConnectOptions::with_user_and_password("aip".into(), password),
        &format!("user = \"aip\"\npassword_file = \"{}\"", wrong.display()),
        &wrong_password,
    )
    .await;
}

#[tokio::test]
async fn a_nats_server_requiring_a_token_is_served_and_a_wrong_token_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let token = id("natstok");
    let Some(nats) = PrivateNats::start(
        dir.path(),
        &format!("authorization {{ token: \"{token}\" }}"),
    ) else {
        return;
    };
    let url = format!("nats://127.0.0.1:{}", nats.port);
    let right = secret_file(dir.path(), "tok", &token);
    let wrong_token = id("wrongtok");
    let wrong = secret_file(dir.path(), "wrong-tok", &wrong_token);
    connection_option_case(
        dir.path(),
        &url,
        &format!("token_file = \"{}\"", right.display()),
        async_nats::ConnectOptions::with_token(token),
        &format!("token_file = \"{}\"", wrong.display()),
        &wrong_token,
    )
    .await;
}

#[tokio::test]
async fn a_nats_server_requiring_an_nkey_is_served_and_an_unknown_nkey_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let user = nkeys::KeyPair::new_user();
    let Some(nats) = PrivateNats::start(
        dir.path(),
        &format!(
            "authorization {{ users: [ {{ nkey: \"{}\" }} ] }}",
            user.public_key()
        ),
    ) else {
        return;
    };
    let url = format!("nats://127.0.0.1:{}", nats.port);
    let seed = user.seed().unwrap();
    let right = secret_file(dir.path(), "user.nk", &seed);
    let stranger = nkeys::KeyPair::new_user().seed().unwrap();
    let wrong = secret_file(dir.path(), "stranger.nk", &stranger);
    connection_option_case(
        dir.path(),
        &url,
        &format!("nkey_seed_file = \"{}\"", right.display()),
        async_nats::ConnectOptions::with_nkey(seed),
        &format!("nkey_seed_file = \"{}\"", wrong.display()),
        &stranger,
    )
    .await;
}

#[tokio::test]
async fn a_nats_server_requiring_tls_is_served_with_its_ca_and_refused_without_it() {
    let dir = tempfile::tempdir().unwrap();
    // A private CA and a server certificate for 127.0.0.1 signed by it.
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "aip test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let server_key = rcgen::KeyPair::generate().unwrap();
    let server_cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    let write = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let ca_file = write("ca.pem", ca.pem());
    let cert_file = write("server.pem", server_cert.pem());
    let key_file = write("server.key", server_key.serialize_pem());
    let Some(nats) = PrivateNats::start(
        dir.path(),
        &format!(
            "tls {{ cert_file: \"{}\", key_file: \"{}\" }}",
            cert_file.display(),
            key_file.display()
        ),
    ) else {
        return;
    };
    let url = format!("tls://127.0.0.1:{}", nats.port);
    connection_option_case(
        dir.path(),
        &url,
        &format!(
            "tls_required = true\ntls_ca_file = \"{}\"",
            ca_file.display()
        ),
        async_nats::ConnectOptions::new()
            .require_tls(true)
            .add_root_certificates(ca_file.clone()),
        // Without the private CA the server's certificate is not trusted.
        "tls_required = true",
        "BEGIN PRIVATE KEY",
    )
    .await;
}

/// A NATS JWT (`ed25519-nkey`): claims issued by `issuer` about `subject`, signed by `issuer`.
fn nats_jwt(issuer: &nkeys::KeyPair, subject: &str, name: &str, nats: Value) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = b64.encode(br#"{"typ":"JWT","alg":"ed25519-nkey"}"#);
    let claims = json!({
        "jti": id("jti").to_uppercase(),
        "iat": 1_700_000_000,
        "iss": issuer.public_key(),
        "name": name,
        "sub": subject,
        "nats": nats,
    });
    let payload = b64.encode(claims.to_string());
    let signing_input = format!("{header}.{payload}");
    let signature = issuer.sign(signing_input.as_bytes()).unwrap();
    format!("{signing_input}.{}", b64.encode(signature))
}

/// A `.creds` file body: the user JWT and the user's NKey seed in the decorated format.
fn creds(user_jwt: &str, user: &nkeys::KeyPair) -> String {
    format!(
        "-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n\
         ************************* IMPORTANT *************************\n\
         NKEY Seed printed below can be used to sign and prove identity.\n\n\
         -----BEGIN USER NKEY SEED-----\n{}\n------END USER NKEY SEED------\n",
        user.seed().unwrap()
    )
}

/// A user of `account` with no limits, as a JWT signed by the account.
fn user_jwt(account: &nkeys::KeyPair, user: &nkeys::KeyPair) -> String {
    nats_jwt(
        account,
        &user.public_key(),
        "aip",
        json!({ "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1, "type": "user", "version": 2 }),
    )
}

#[tokio::test]
async fn a_nats_server_in_operator_mode_is_served_with_a_credentials_file_and_a_foreign_one_stops_startup()
 {
    let dir = tempfile::tempdir().unwrap();
    // Decentralised auth: an operator, one account it signs (preloaded into a memory resolver), and a
    // user of that account whose JWT + seed make the `.creds` file.
    let operator = nkeys::KeyPair::new_operator();
    let account = nkeys::KeyPair::new_account();
    let user = nkeys::KeyPair::new_user();
    let operator_jwt = nats_jwt(
        &operator,
        &operator.public_key(),
        "aip-test-operator",
        json!({ "type": "operator", "version": 2 }),
    );
    let account_jwt = nats_jwt(
        &operator,
        &account.public_key(),
        "aip-test-account",
        json!({
            "limits": { "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1,
                        "wildcards": true, "conn": -1, "leaf": -1 },
            "type": "account", "version": 2
        }),
    );
    let Some(nats) = PrivateNats::start(
        dir.path(),
        &format!(
            "operator: {operator_jwt}\nresolver: MEMORY\nresolver_preload: {{ {}: {account_jwt} }}",
            account.public_key()
        ),
    ) else {
        return;
    };
    let url = format!("nats://127.0.0.1:{}", nats.port);
    let right_creds = creds(&user_jwt(&account, &user), &user);
    // Saved without its final line break, as some editors do: still accepted.
    let right = secret_file(dir.path(), "user.creds", right_creds.trim_end());
    // A user of an account this server does not know.
    let stranger = nkeys::KeyPair::new_user();
    let stranger_account = nkeys::KeyPair::new_account();
    let wrong = secret_file(
        dir.path(),
        "stranger.creds",
        &creds(&user_jwt(&stranger_account, &stranger), &stranger),
    );
    connection_option_case(
        dir.path(),
        &url,
        &format!("credentials_file = \"{}\"", right.display()),
        async_nats::ConnectOptions::with_credentials(&right_creds).unwrap(),
        &format!("credentials_file = \"{}\"", wrong.display()),
        &stranger.seed().unwrap(),
    )
    .await;
}

#[tokio::test]
async fn a_handshake_over_nats_negotiates_the_nats_profile_and_the_manifest_names_every_enabled_binding()
 {
    let Some(url) = nats_url("serve_nats") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let domain = format!("t{}.example", id(""));
    let server = start_node(dir.path(), &url, &domain);
    let client = async_nats::connect(&url).await.unwrap();
    let prefix = format!("aip.v1.{}.aip.v1", domain.replace('.', "_"));

    let hello = envelope(
        "aip.core.v1.handshake",
        json!({ "handshake": { "client": { "id": "svc:nats", "kind": "service" }, "purpose": "nats", "profiles": ["aip.native.nats.v1"] } }),
    );
    let (_, reply) = request(
        &client,
        format!("{prefix}.aip_core_v1_handshake"),
        &hello,
        true,
    )
    .await;
    let response = &reply["envelope"]["body"]["handshake_response"];
    assert_eq!(response["status"], "accepted", "{reply}");
    assert_eq!(response["agreed_profiles"], json!(["aip.native.nats.v1"]));

    // A profile the node does not serve is not agreed to.
    let mcp = envelope(
        "aip.core.v1.handshake",
        json!({ "handshake": { "client": { "id": "svc:nats", "kind": "service" }, "purpose": "nats", "profiles": ["aip.native.grpc.v1"] } }),
    );
    let (_, reply) = request(
        &client,
        format!("{prefix}.aip_core_v1_handshake"),
        &mcp,
        true,
    )
    .await;
    let response = &reply["envelope"]["body"]["handshake_response"];
    assert_eq!(response["status"], "rejected", "{reply}");

    let ask = envelope(
        "aip.discovery.v1.manifest_request",
        json!({ "manifest_request": {} }),
    );
    let (_, reply) = request(
        &client,
        format!("{prefix}.aip_discovery_v1_manifest_request"),
        &ask,
        true,
    )
    .await;
    assert_eq!(
        reply["envelope"]["body"]["manifest"]["profiles"],
        json!([
            "aip.native.http.v1",
            "aip.sse.stream.v1",
            "aip.websocket.stream.v1",
            "aip.mcp.compat.v1",
            "aip.a2a.compat.v1",
            "aip.native.nats.v1"
        ]),
        "{reply}"
    );
    let (_, http_manifest) = server.admin().get("/aip/v1/manifest").await;
    assert_eq!(
        http_manifest["profiles"],
        reply["envelope"]["body"]["manifest"]["profiles"]
    );
}
