//! A plain async-nats client for the tests that speak to `aip serve` over NATS.

use std::time::Duration;

use async_nats::HeaderMap;
use serde_json::{Value, json};

use std::path::{Path, PathBuf};

use super::{Server, id, skip_or_fail, token_file};

/// `AIP_TEST_NATS_URL`, or `None` after a SKIP notice when it is unset or nothing listens there;
/// under `CI=true` either fails the test ([`skip_or_fail`]).
pub fn nats_url(test: &str) -> Option<String> {
    let Ok(url) = std::env::var("AIP_TEST_NATS_URL") else {
        skip_or_fail(&format!(
            "AIP_TEST_NATS_URL is not set; {test} needs a NATS server"
        ));
        return None;
    };
    if let Err(e) = listening(&url) {
        skip_or_fail(&format!(
            "no NATS server answers at AIP_TEST_NATS_URL ({e}); {test} needs one"
        ));
        return None;
    }
    Some(url)
}

/// Connects over TCP to the first server of a `nats://[user@]host[:port][,...]` URL.
fn listening(url: &str) -> std::io::Result<()> {
    use std::net::ToSocketAddrs;
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let server = rest.split([',', '/', '?']).next().unwrap_or_default();
    let host_port = server.rsplit_once('@').map_or(server, |(_, hp)| hp);
    let host_port = if host_port
        .rsplit_once(']')
        .map_or(host_port, |(_, p)| p)
        .contains(':')
    {
        host_port.to_owned()
    } else {
        format!("{host_port}:4222")
    };
    let addr = host_port.to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{host_port}: no address"),
        )
    })?;
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(3)).map(drop)
}

/// One request with the standard headers; returns the reply's headers and JSON payload.
pub async fn request(
    client: &async_nats::Client,
    subject: String,
    envelope: &Value,
    wrapped: bool,
) -> (HeaderMap, Value) {
    let mut headers = HeaderMap::new();
    headers.insert("AIP-Version", "1.0");
    headers.insert(
        "AIP-Message-Type",
        envelope["message_type"].as_str().unwrap(),
    );
    headers.insert("AIP-Message-Id", envelope["message_id"].as_str().unwrap());
    let payload = if wrapped {
        json!({ "envelope": envelope, "metadata": { "client": "plain async-nats" } })
    } else {
        envelope.clone()
    };
    let reply = tokio::time::timeout(
        Duration::from_secs(20),
        client.request_with_headers(subject, headers, payload.to_string().into()),
    )
    .await
    .unwrap()
    .unwrap();
    (
        reply.headers.clone().unwrap_or_default(),
        serde_json::from_slice(&reply.payload).unwrap(),
    )
}

pub fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).map(|v| v.as_str()).unwrap_or_default()
}

/// A node whose NATS messages act as `svc:nats`, allowed to invoke only echo, sleep and count.
pub fn start_node(dir: &Path, url: &str, trust_domain: &str) -> Server {
    let config = node_config(dir, url, trust_domain, "");
    Server::start(&dir.join("data"), Some(&config), &[])
}

/// The config file of such a node, with `extra` lines in its `[nats]` table.
pub fn node_config(dir: &Path, url: &str, trust_domain: &str, extra: &str) -> PathBuf {
    let scopes = ["cap:demo:echo", "cap:demo:sleep", "cap:demo:count"];
    node_config_invoking(dir, url, trust_domain, extra, &scopes)
}

/// [`node_config`] for a `svc:nats` allowed to invoke only `capabilities`.
pub fn node_config_invoking(
    dir: &Path,
    url: &str,
    trust_domain: &str,
    extra: &str,
    capabilities: &[&str],
) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let scopes = capabilities
        .iter()
        .map(|c| format!("\"invoke:{c}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let token = token_file(dir, "nats.token", &id("tok"));
    let config = dir.join("aip.toml");
    std::fs::write(
        &config,
        format!(
            "[nats]\nurl = \"{url}\"\ntrust_domain = \"{trust_domain}\"\nprincipal = \"svc:nats\"\n{extra}\n\
             [[principals]]\nid = \"svc:nats\"\nscopes = [{scopes}]\n\
             token_file = \"{}\"\n",
            token.display()
        ),
    )
    .unwrap();
    config
}

/// A node as [`start_node`] makes it, with `nats_extra` lines in its `[nats]` table and `limits`
/// (TOML tables) appended, under a trust domain of its own; with a client connected to `url` and
/// the node's subject prefix.
pub async fn limited_node(
    dir: &Path,
    url: &str,
    nats_extra: &str,
    limits: &str,
) -> (Server, async_nats::Client, String) {
    let domain = format!("t{}.example", id(""));
    let config = node_config(dir, url, &domain, nats_extra);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(limits);
    std::fs::write(&config, text).unwrap();
    let server = Server::start(&dir.join("data"), Some(&config), &[]);
    let client = async_nats::connect(url).await.unwrap();
    let prefix = format!("aip.v1.{}.aip.v1", domain.replace('.', "_"));
    (server, client, prefix)
}
